"""rl.report on hand-made run folders: grouping, the table's numbers, the plot."""
import json
import os
import sys
import warnings

from matplotlib import image
import pytest

import in_process
from rl import report
from rl import run_groups


def _record(epoch, env_steps, eval_return, seconds=(1.0, 2.0, 1.0)):
  collect, train, evaluate = seconds
  return {'epoch': epoch, 'env_steps': env_steps, 'eval_return': eval_return,
          'time_collect': collect, 'time_train': train, 'time_eval': evaluate}


# The first epoch's seconds: mostly jit compilation, so far more than the others'.
COMPILE_SECONDS = (15.0, 4.0, 1.0)


def _write_run(folder, config, records):
  os.makedirs(folder)
  with open(os.path.join(folder, 'config.gin'), 'w') as f:
    f.write(config)
  with open(os.path.join(folder, 'metrics.jsonl'), 'w') as f:
    f.writelines(json.dumps(record) + '\n' for record in records)


def _make_run(folder, seed, learning_rate, evals, n_epochs=None, stop_at_return=None):
  """A run folder: config.gin and metrics.jsonl with evals at 100, 200, ... env steps.

  The run asked for `n_epochs` (default: as many as `evals`, so it finished).
  """
  config = ('# Parameters for Adam:\n'
            f'Adam.learning_rate = {learning_rate}\n'
            'RLTask.env = \'CartPole-v1\'\n'
            f'RLTask.seed = {seed}\n'
            f'train_rl.n_epochs = {len(evals) if n_epochs is None else n_epochs}\n'
            f'train_rl.stop_at_return = {stop_at_return}\n')
  _write_run(folder, config,
             [_record(i + 1, 100 * (i + 1), value, COMPILE_SECONDS if i == 0 else (1.0, 2.0, 1.0))
              for i, value in enumerate(evals)])


@pytest.fixture
def runs(tmp_path):
  """Two groups (learning rates) x two seeds; the second group's seeds four levels down."""
  _make_run(str(tmp_path / 'fast' / 'seed_0'), 0, 0.1, [10.0, 500.0, 480.0])
  _make_run(str(tmp_path / 'fast' / 'seed_1'), 1, 0.1, [20.0, 100.0, 490.0])
  _make_run(str(tmp_path / 'slow' / 'sweep' / 'lr' / 'seed_0'), 0, 0.01, [5.0, 6.0, 7.0])
  # A null eval (no episode ended) is skipped, not taken as the final value.
  _make_run(str(tmp_path / 'slow' / 'sweep' / 'lr' / 'seed_1'), 1, 0.01, [1.0, 3.0, None])
  return str(tmp_path)


def test_runs_are_found_at_any_depth_and_grouped_by_config_but_seed(runs):
  # A run folder's own subfolders are not searched.
  _make_run(os.path.join(runs, 'fast', 'seed_0', 'checkpoints', 'stray'), 0, 0.5, [1.0])
  found = report.find_runs(runs)
  assert [os.path.relpath(r, runs) for r in found] == [
      'fast/seed_0', 'fast/seed_1', 'slow/sweep/lr/seed_0', 'slow/sweep/lr/seed_1']
  groups = report.group_runs(found, 'x')
  # Named by the one binding that differs between groups (not env, not seed).
  assert [(name, table, len(members)) for name, table, members in groups] == [
      ('learning_rate=0.1', {'Adam.learning_rate': '0.1'}, 2),
      ('learning_rate=0.01', {'Adam.learning_rate': '0.01'}, 2)]


def test_report_numbers_with_target(runs):
  text = report.make_report(runs, target=475)
  with open(os.path.join(runs, 'report.md')) as f:
    assert f.read() == text
  fast, slow = text.split('## ')[1:3]
  # Finals 480 and 490: mean 485, population std 5; best 500. Each run trains
  # epochs 2 and 3 (4 s each: 8 s) after its 20 s first epoch. Seed 0 reaches
  # 475 at epoch 2 (200 steps, 4 s after the first epoch), seed 1 at epoch 3 (300, 8 s).
  assert fast.startswith('G1: learning_rate=0.1\n\n| binding | value |\n|---|---|\n'
                         '| Adam.learning_rate | 0.1 |\n')
  assert '| 2 | 485.0 ± 5.0 | 500.0 | 8.0 | 20.0 | 2/2 | 250 | 6.0 |' in fast
  assert 'fast/seed_0, fast/seed_1' in fast
  # Finals 7 and 3 (the null eval skipped): 5 ± 2; best 7; no run reaches 475.
  assert slow.startswith('G2: learning_rate=0.01\n')
  assert '| 2 | 5.0 ± 2.0 | 7.0 | 8.0 | 20.0 | 0/2 | — | — |' in slow
  assert 'runs reaching 475' in text


def test_group_summary_values(runs):
  records = [[_record(1, 100, 10.0), _record(2, 200, 500.0), _record(3, 300, 480.0)],
             [_record(1, 100, 20.0), _record(2, 200, 100.0), _record(3, 300, 490.0)]]
  row = report.summarize_group('g', records, target=475)
  assert (row['n_runs'], row['final_mean'], row['final_std'], row['best']) == (2, 485, 5, 500)
  # Seconds after the first epoch (4 s each): to epoch 2 and to epoch 3.
  assert (row['n_reached'], row['median_steps'], row['median_seconds']) == (2, 250, 6)
  assert (row['train_seconds'], row['compile_seconds']) == (8, 4)


def test_without_target_the_target_columns_are_left_out(runs):
  text = report.make_report(runs)
  assert 'reaching' not in text.split('\n\n')[2]
  assert '| 2 | 485.0 ± 5.0 | 500.0 | 8.0 | 20.0 |\n' in text


def test_plot_is_written_with_size_and_dimensions(runs):
  report.make_report(runs, target=475)
  path = os.path.join(runs, 'learning_curves.png')
  assert os.path.getsize(path) > 10_000
  pixels = image.imread(path)
  assert pixels.ndim == 3 and pixels.shape[0] >= 300 and pixels.shape[1] >= 500
  assert pixels.std() > 0  # not a blank canvas


def test_without_matplotlib_the_report_is_written_and_the_plot_named_in_one_line(
    runs, monkeypatch, capsys):
  monkeypatch.setitem(sys.modules, 'matplotlib.pyplot', None)  # import fails as if absent
  text = report.make_report(runs, target=475)
  assert '| 2 |' in text and os.path.exists(os.path.join(runs, 'report.md'))
  assert not os.path.exists(os.path.join(runs, 'learning_curves.png'))
  [line] = capsys.readouterr().err.splitlines()
  assert 'learning_curves.png not drawn' in line and "pip install '.[plots]'" in line
  # A plot left by an earlier report does not stay beside the new table.
  plot = os.path.join(runs, 'learning_curves.png')
  with open(plot, 'wb') as f:
    f.write(b'an earlier plot')
  report.make_report(runs, target=475)
  assert not os.path.exists(plot)
  [line] = capsys.readouterr().err.splitlines()
  assert 'not drawn (the earlier one removed)' in line


def test_one_run_folder_is_its_own_group(tmp_path):
  run_dir = str(tmp_path / 'only')
  _make_run(run_dir, 0, 0.1, [1.0, 2.0])
  text = report.make_report(run_dir)
  assert '## only\n' in text and '| 1 | 2.0 ± 0.0 | 2.0 | 4.0 | 20.0 |' in text
  assert os.path.isfile(os.path.join(run_dir, 'learning_curves.png'))


def _report_cli(runs_dir, *flags):
  return in_process.run(runs_dir, *flags, program='rl.report')


def test_cli_prints_the_report_and_rejects_a_folder_without_runs(runs, tmp_path):
  ok = _report_cli(runs, '--target=475')
  assert ok.returncode == 0, ok.stderr
  assert '| 2 | 485.0 ± 5.0 | 500.0 | 8.0 | 20.0 | 2/2 | 250 | 6.0 |' in ok.stdout
  empty = tmp_path / 'empty'
  empty.mkdir()
  bad = _report_cli(str(empty))
  assert bad.returncode == 2
  assert len(bad.stderr.strip().splitlines()) == 1 and 'no metrics.jsonl' in bad.stderr


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


def test_14_groups_get_short_names_and_a_readable_plot_without_warnings(tmp_path):
  # 2 trainers x 7 epsilons, one env each, 2 seeds: 14 groups whose names all
  # begin alike; every trainer parameter of one trainer is unset in the other's runs.
  for trainer, env in (('A2C', 'CartPole-v1'), ('PPO', 'Pendulum-v1')):
    for epsilon in (0.1, 0.15, 0.2, 0.25, 0.3, 0.35, 0.4):
      for seed in (0, 1):
        _write_run(str(tmp_path / f'{trainer}_eps{epsilon}' / f'seed_{seed}'),
                   _sweep_config(trainer, epsilon, env, seed),
                   [_record(epoch, 100 * epoch, 10 * epsilon * epoch + seed)
                    for epoch in (1, 2, 3)])
  with warnings.catch_warnings():
    warnings.simplefilter('error')  # e.g. matplotlib's 'Tight layout not applied'
    text = report.make_report(str(tmp_path))
  headings = [line for line in text.splitlines() if line.startswith('## ')]
  # Named by the bindings that differ; seeds pooled; the other trainer's unset
  # parameters left out.
  assert headings[0] == "## G1: trainer_class=@A2C, env='CartPole-v1', epsilon=0.1"
  assert headings[13] == "## G14: trainer_class=@PPO, env='Pendulum-v1', epsilon=0.4"
  assert len(headings) == 14 and '(unset)' not in text
  assert '| A2C.epsilon | 0.1 |' in text.split('## ')[1]
  assert text.count('| 2 |') == 14
  # The legend names the groups by their keys, outside the axes: it covers no curve.
  groups = [(f'G{i}', [([100, 200, 300], [1.0, 2.0, 3.0])] * 2) for i in range(1, 15)]
  with warnings.catch_warnings():
    warnings.simplefilter('error')
    fig = report.curves_figure(groups, target=475)
    fig.canvas.draw()
  ax, = fig.axes
  legend = ax.get_legend()
  assert [t.get_text() for t in legend.get_texts()] == (
      [f'G{i} (2 runs)' for i in range(1, 15)] + ['target 475'])
  assert legend.get_window_extent().x0 >= ax.get_window_extent().x1
  assert fig.get_window_extent().x1 >= legend.get_window_extent().x1  # not cut off
  # Groups past the 10 colours are told apart by their line style.
  lines = ax.get_lines()
  assert (lines[0].get_color(), lines[0].get_linestyle()) != (
      lines[10].get_color(), lines[10].get_linestyle())


def test_groups_differing_in_many_bindings_get_short_names_and_a_table(tmp_path):
  # Two tuned configs of one trainer on two envs: 32 bindings differ.
  params = [f'PPO.param_{i:02d}' for i in range(28)] + ['policy/multifactor.constant',
                                                        'value/multifactor.constant']
  for env, scale in (('CartPole-v1', 1), ('Pendulum-v1', 2)):
    config = ''.join(f'{p} = {scale * (i + 1)}\n' for i, p in enumerate(params))
    config += f"RLTask.env = '{env}'\n" + 'train_rl.trainer_class = @PPO\n'
    config += f"MLP.activation_fn = 'a_long_activation_name_number_{scale}'\n"
    _write_run(str(tmp_path / env / 'seed_0'), config + 'RLTask.seed = 0\n', [_record(1, 100, 1.0)])
  text = report.make_report(str(tmp_path))
  headings = [line for line in text.splitlines() if line.startswith('## ')]
  # The leading binding first; a long value cut; the count of the others.
  assert headings == ["## G1: env='CartPole-v1', activation_fn='a_long_activation_name… (+30 more)",
                      "## G2: env='Pendulum-v1', activation_fn='a_long_activation_name… (+30 more)"]
  # The table under each heading gives every differing binding in full, the
  # scopes telling the two schedules apart.
  second = text.split('## ')[2]
  assert "| MLP.activation_fn | 'a_long_activation_name_number_2' |" in second
  assert '| policy/multifactor.constant | 58 |' in second
  assert second.count('\n| ') == 1 + 32 + 2  # its header, 32 bindings; the results' two rows


def test_unfinished_runs_are_left_out_and_listed_with_their_epoch(tmp_path):
  fast = str(tmp_path / 'fast' / 'seed_')
  _make_run(fast + '0', 0, 0.1, [10.0, 300.0, 480.0], n_epochs=3, stop_at_return=475)
  # Stopped at train_rl.stop_at_return: finished at epoch 2 of 3.
  _make_run(fast + '1', 1, 0.1, [20.0, 490.0], n_epochs=3, stop_at_return=475)
  # Interrupted at epoch 1 of 3: pooled, its eval would pull the mean down.
  _make_run(fast + '2', 2, 0.1, [10.0], n_epochs=3, stop_at_return=475)
  # A group none of whose runs finished.
  _make_run(str(tmp_path / 'slow' / 'seed_0'), 0, 0.01, [5.0, 6.0], n_epochs=3,
            stop_at_return=475)
  done = _report_cli(str(tmp_path))
  assert done.returncode == 0, done.stderr
  fast_section, slow_section = done.stdout.split('## ')[1:3]
  assert fast_section.startswith('G1: learning_rate=0.1\n')
  assert '| 2 | 485.0 ± 5.0 | 490.0 |' in fast_section
  assert 'Runs: fast/seed_0, fast/seed_1\n' in fast_section
  assert 'Unfinished, left out: fast/seed_2 (epoch 1 of 3)' in fast_section
  assert 'runs |' not in slow_section and '| Adam.learning_rate | 0.01 |' in slow_section
  assert 'No finished run. Unfinished, left out: slow/seed_0 (epoch 2 of 3)' in slow_section


def test_compile_seconds_are_reported_apart_from_training(tmp_path):
  def run(name, records):
    _write_run(str(tmp_path / name), f"RLTask.env = '{name}'\ntrain_rl.n_epochs = 4\n", records)

  # Without time_compile the first epoch's seconds (20) are the compile time.
  run('plain', [_record(1, 100, 1.0, COMPILE_SECONDS)]
      + [_record(epoch, 100 * epoch, 1.0) for epoch in (2, 3, 4)])
  # With it, every epoch that logs it compiled (here also the first after a
  # resume): 30 + 9 s of compiling, and 2 x 4 s of training.
  run('logged', [{**_record(1, 100, 1.0, COMPILE_SECONDS), 'time_compile': 30.0},
                 _record(2, 200, 1.0),
                 {**_record(3, 300, 1.0, (6.0, 2.0, 1.0)), 'time_compile': 9.0},
                 _record(4, 400, 500.0)])
  text = report.make_report(str(tmp_path), target=475)
  logged, plain = text.split('## ')[1:3]  # sorted by folder name
  assert '| 12.0 | 20.0 | 0/1 |' in plain
  assert '| 8.0 | 39.0 | 1/1 | 400 | 8.0 |' in logged
  assert 'training seconds (mean) | compile seconds (mean)' in text
