"""rl.report on hand-made run folders: which runs form a group, and the groups' names."""
import os
import warnings

import pytest

from rl import report
from rl import report_figure
from rl import run_groups
from report_helpers import captured_panels
from report_helpers import make_run
from report_helpers import make_runs
from report_helpers import record
from report_helpers import write_run


@pytest.fixture
def runs(tmp_path):
  """Two groups (learning rates): three seeds, and two seeds four levels down."""
  return make_runs(tmp_path)


def test_runs_are_found_at_any_depth_and_groups_named_by_their_folders(runs):
  # A run folder's own subfolders are not searched.
  make_run(os.path.join(runs, 'fast', 'seed_0', 'checkpoints', 'stray'), 0, 0.5, [1.0])
  found = report.find_runs(runs)
  assert [os.path.relpath(r, runs) for r in found] == [
      'fast/seed_0', 'fast/seed_1', 'fast/seed_2', 'slow/sweep/lr/seed_0',
      'slow/sweep/lr/seed_1']
  groups = run_groups.group_runs(found, runs)
  # The folder above the seeds names a group; its table holds the binding that differs.
  assert [(name, table, len(members)) for name, table, members in groups] == [
      ('fast', {'Adam.learning_rate': '0.1'}, 3),
      ('slow/sweep/lr', {'Adam.learning_rate': '0.01'}, 2)]
  # A --seeds run's parent given as RUNS_DIR names its group.
  make_run(os.path.join(runs, 'seed_7'), 7, 0.5, [1.0])
  assert [name for name, _, _ in run_groups.group_runs(report.find_runs(runs), runs)] == [
      'fast', os.path.basename(runs), 'slow/sweep/lr']


def test_groups_sharing_a_folder_are_named_by_their_bindings_briefly(tmp_path):
  make_run(str(tmp_path / 'mixed' / 'seed_0'), 0, 0.1, [1.0])
  make_run(str(tmp_path / 'mixed' / 'seed_1'), 1, 0.01, [1.0])
  text = report.make_report(str(tmp_path))
  assert [line for line in text.splitlines() if line.startswith('## ')] == [
      '## learning_rate=0.1', '## learning_rate=0.01']
  assert '| learning_rate=0.1 | CartPole-v1 | 1/1 |' in text
  # The trainer and the env by their value alone.
  assert run_groups.group_names([
      {'train_rl.trainer_class': '@A2C', 'RLTask.env': "'CartPole-v1'", 'RLTask.gamma': '0.98'},
      {'train_rl.trainer_class': '@PPO', 'RLTask.env': "'Acrobot-v1'", 'RLTask.gamma': '0.99'}
  ]) == ['A2C, CartPole-v1, gamma=0.98', 'PPO, Acrobot-v1, gamma=0.99']
  # Names that the cut makes equal end in their group's number.
  assert run_groups.group_names([{'A.a': 'x' * 30 + '1'}, {'A.a': 'x' * 30 + '2'}]) == [
      'a=' + 'x' * 23 + '… [1]', 'a=' + 'x' * 23 + '… [2]']


def test_one_run_folder_is_its_own_group(tmp_path):
  run_dir = str(tmp_path / 'only')
  make_run(run_dir, 0, 0.1, [1.0, 2.0])
  text = report.make_report(run_dir)
  assert '## only\n' in text and '| only | CartPole-v1 | 1/1 | 2.0 (1 run, no CI) |' in text
  assert '| only | finished | 2.0 | 2.0 | 4.0 | 20.0 |' in text
  assert os.path.isfile(os.path.join(run_dir, 'learning_curves.png'))


def test_groups_told_apart_only_by_a_binding_one_lacks_name_it_unset():
  tables = run_groups.differing_bindings([
      {'RLTask.env': "'CartPole-v1'", 'Policy.normalizer': '@Norm'},
      {'RLTask.env': "'CartPole-v1'"}])
  assert tables == [{'Policy.normalizer': '@Norm'}, {'Policy.normalizer': '(unset)'}]
  assert run_groups.group_names(tables) == ['normalizer=@Norm', 'normalizer=(unset)']


# A trainer's operative config.gin: every parameter, defaults included, scoped by
# the trainer, so that other trainers' runs lack all of them.
TRAINER_PARAMS = ('added_policy_slice_length = 16', 'entropy_coeff = 0.0', 'eval_every = 10',
                  'max_slice_length = 1', 'n_eval_episodes = 10', 'policy_batch_size = 256',
                  'policy_optimizer = @Adam', 'policy_train_steps_per_epoch = 20',
                  'value_batch_size = 256', 'value_train_steps_per_epoch = 20')


def _sweep_config(trainer, epsilon, env, seed):
  lines = [f'{trainer}.{param}' for param in TRAINER_PARAMS]
  lines += [f'{trainer}.epsilon = {epsilon}', f"RLTask.env = '{env}'", f'RLTask.seed = {seed}',
            'RLTask.gamma = 0.98', 'train_rl.n_epochs = 3', 'train_rl.stop_at_return = None',
            f'train_rl.trainer_class = @{trainer}']
  return '\n'.join(lines) + '\n'


def test_14_groups_one_folder_get_short_names_and_a_readable_plot_without_warnings(
    tmp_path, monkeypatch):
  # 2 trainers x 7 epsilons, one env each, 2 seeds, all in one folder: 14 groups named by
  # their bindings; every trainer parameter of one trainer is unset in the other's runs.
  for trainer, env in (('A2C', 'CartPole-v1'), ('PPO', 'Pendulum-v1')):
    for epsilon in (0.1, 0.15, 0.2, 0.25, 0.3, 0.35, 0.4):
      for seed in (0, 1):
        write_run(str(tmp_path / f'{trainer}_eps{100 * epsilon:03.0f}_seed{seed}'),
                   _sweep_config(trainer, epsilon, env, seed),
                   [record(epoch, 100 * epoch, 10 * epsilon * epoch + seed)
                    for epoch in (1, 2, 3)])
  calls = captured_panels(monkeypatch)
  text = report.make_report(str(tmp_path))
  headings = [line for line in text.splitlines() if line.startswith('## ')]
  # Seeds pooled; the other trainer's unset parameters left out.
  assert headings[0] == '## A2C, CartPole-v1, epsilon=0.1'
  assert headings[13] == '## PPO, Pendulum-v1, epsilon=0.4'
  assert len(headings) == 14 and '(unset)' not in text
  assert '| A2C.epsilon | 0.1 |' in text.split('## ')[1]
  assert text.count('| 2/2 |') == 14
  [(panels, kwargs)] = calls
  assert [(env, len(groups)) for env, groups in panels] == [('CartPole-v1', 7),
                                                            ('Pendulum-v1', 7)]
  # 14 groups in one panel: the legend names them all, outside the axes.
  groups = [report_figure.GroupCurves(f'a group with a long name {i}',
                                      [([100, 200, 300], [1.0, 2.0, 3.0])] * 2, [])
            for i in range(1, 15)]
  with warnings.catch_warnings():
    warnings.simplefilter('error')  # e.g. matplotlib's 'Tight layout not applied'
    fig = report_figure.curves_figure([('CartPole-v1', groups)], target=475)
    fig.canvas.draw()
  ax, = fig.axes
  legend = ax.get_legend()
  assert [t.get_text() for t in legend.get_texts()] == (
      [f'a group with a long name {i} (2 runs, no CI)' for i in range(1, 15)] + ['target 475'])
  assert legend.get_window_extent().x0 >= ax.get_window_extent().x1
  assert fig.get_window_extent().x1 >= legend.get_window_extent().x1  # not cut off
  # Groups past the 10 colours are told apart by their line style.
  lines = [line for line in ax.get_lines() if line.get_linewidth() == 2]
  assert (lines[0].get_color(), lines[0].get_linestyle()) != (
      lines[10].get_color(), lines[10].get_linestyle())


def test_groups_differing_in_many_bindings_get_short_names_and_a_table(tmp_path):
  # Two tuned configs of one trainer on two envs, in one folder: 32 bindings differ.
  params = [f'PPO.param_{i:02d}' for i in range(28)] + ['policy/multifactor.constant',
                                                        'value/multifactor.constant']
  for env, scale in (('CartPole-v1', 1), ('Pendulum-v1', 2)):
    config = ''.join(f'{p} = {scale * (i + 1)}\n' for i, p in enumerate(params))
    config += f"RLTask.env = '{env}'\n" + 'train_rl.trainer_class = @PPO\n'
    config += f"MLP.activation_fn = 'a_long_activation_name_number_{scale}'\n"
    write_run(str(tmp_path / 'tuned' / f'seed_{scale}'), config + f'RLTask.seed = {scale}\n',
               [record(1, 100, 1.0)])
  text = report.make_report(str(tmp_path))
  headings = [line for line in text.splitlines() if line.startswith('## ')]
  # The env first, by its value; the count of the others.
  assert headings == ['## CartPole-v1 (+31 more)', '## Pendulum-v1 (+31 more)']
  # The table under each heading gives every differing binding in full, the
  # scopes telling the two schedules apart.
  second = text.split('## ')[2]
  assert "| MLP.activation_fn | 'a_long_activation_name_number_2' |" in second
  assert '| policy/multifactor.constant | 58 |' in second
  assert second.count('\n| ') == 1 + 32 + 2  # its header, 32 bindings; the runs' two rows
