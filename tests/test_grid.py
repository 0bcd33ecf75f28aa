"""A grid of float hyperparameters x seeds in one program (rl.grid, rl.members, rl.traced_values).

A member computes what the single run with its bindings computes (up to float
rounding: its values are inputs of the program, not constants), each member
is an ordinary run folder that resumes after SIGKILL bit for bit and that
rl.report groups by its cell, and what cannot be a grid in one program is
refused in one line before anything is written.
"""
import functools
import os

import jax
import numpy as np
import pytest

from rl import evaluate
from rl import experiment
from rl import grid as grid_lib
from rl import report
from rl import traced_values
from rl.errors import ConfigError
from rl.metrics import TIMING_KEYS
from rl.metrics import read_metrics
from run_helpers import PPO_JAX
from run_helpers import REINFORCE
from run_helpers import ROOT
from run_helpers import TINY
from run_helpers import TINY_PPO_JAX
from run_helpers import cli
from run_helpers import killed_and_resumed_jax_run

BINDINGS = TINY_PPO_JAX + ['train_rl.n_epochs = 2', 'PPO.eval_every = 2']
GRID = {'PPO.epsilon': [0.1, 0.3], 'policy/multifactor.constant': [0.001, 0.003]}
LAST_CELL = 'PPO.epsilon=0.3,policy_multifactor.constant=0.003'


def numbers(folder):
  return [{k: v for k, v in r.items() if k not in TIMING_KEYS and 'per_second' not in k}
          for r in read_metrics(folder)]


def test_grid_flags_are_parsed_or_refused_in_one_line():
  assert grid_lib.parse_grid(['policy/multifactor.constant=[1e-3, 3e-4]', 'PPO.epsilon=[0.2]']) \
      == {'PPO.epsilon': [0.2], 'policy/multifactor.constant': [1e-3, 3e-4]}
  assert grid_lib.cells({'A.b': [1.0, 2.0], 'C.d': [3.0]}) == [
      {'A.b': 1.0, 'C.d': 3.0}, {'A.b': 2.0, 'C.d': 3.0}]
  refusals = {
      'PPO.epsilon': 'write a binding and its values',
      'PPO.epsilon=0.1': 'a list of numbers',
      "PPO.epsilon=['a']": 'a list of numbers',
      'PPO.epsilon=[0.1, 0.1]': 'repeats a value',
      'PPO.policy_batch_size=[16, 32]': 'python -m launch.sweep',
      'RLTask.gamma=[0.9, 0.99]': 'change the program',
  }
  for text, words in refusals.items():
    with pytest.raises(ConfigError, match=words.replace('.', r'\.')):
      grid_lib.parse_grid([text])
  with pytest.raises(ConfigError, match='given twice'):
    grid_lib.parse_grid(['PPO.epsilon=[0.1]', 'PPO.epsilon=[0.2]'])
  with pytest.raises(ConfigError, match='at most'):
    grid_lib.check_size(grid_lib.MAX_MEMBERS, 2)


@pytest.fixture(scope='module')
def grid_job(tmp_path_factory):
  """A 2 x 2 grid of seed 1, trained in one program: its folder."""
  out = tmp_path_factory.mktemp('grid') / 'job'
  trainers = experiment.execute_seeds([PPO_JAX], BINDINGS, str(out), [1], grid=GRID)
  assert [t.epoch for t in trainers] == [2] * 4
  return out


def test_a_member_is_the_single_run_with_its_bindings(grid_job, tmp_path):
  cells = sorted(os.listdir(grid_job))
  assert cells == sorted(grid_lib.point_name(cell) for cell in grid_lib.cells(GRID))
  member = grid_job / LAST_CELL / 'seed_1'
  config = (member / 'config.gin').read_text()
  assert 'PPO.epsilon = 0.3' in config and 'policy/multifactor.constant = 0.003' in config
  alone = tmp_path / 'alone'
  with experiment.prepared_run([PPO_JAX], BINDINGS + grid_lib.cell_bindings(
      {'PPO.epsilon': 0.3, 'policy/multifactor.constant': 0.003}), str(alone), 1) as prepared:
    experiment.train(prepared)
  first = grid_job / grid_lib.point_name({'PPO.epsilon': 0.1, 'policy/multifactor.constant':
                                          0.001}) / 'seed_1'
  ours, single, lead = numbers(member), numbers(alone), numbers(first)
  assert [sorted(r) for r in ours] == [sorted(r) for r in single]
  for got, want in zip(ours, single):
    # Its values are inputs of the program here, constants alone: the last bits may differ.
    assert {k for k, v in got.items() if v is None} == {k for k, v in want.items() if v is None}
    keys = sorted(k for k, v in got.items() if v is not None)
    np.testing.assert_allclose([got[k] for k in keys], [want[k] for k in keys], rtol=2e-4,
                               atol=1e-6, err_msg=str(keys))
  # The values reach the program: the first cell (the program's lead) trains otherwise.
  assert ours[0]['policy_learning_rate'] == pytest.approx(0.003)
  assert lead[0]['policy_learning_rate'] == pytest.approx(0.001)
  assert ours[0]['policy_loss'] != pytest.approx(lead[0]['policy_loss'], rel=1e-3)
  # The first epoch's collection is the same draw alone and in the grid.
  assert ours[0]['train_return'] == single[0]['train_return']
  assert 'eval_return' in ours[-1]


def test_report_groups_a_grid_by_its_cells_and_evaluate_replays_a_member(grid_job):
  text = report.make_report(str(grid_job), how='mean')
  for cell in grid_lib.cells(GRID):
    assert grid_lib.point_name(cell) in text
  # The member's own evaluation, logged from the grid's program, replays from its checkpoint.
  member = grid_job / LAST_CELL / 'seed_1'
  result = evaluate.evaluate_run(str(member), n_episodes=2)
  assert result['epoch'] == 2
  assert result['mean'] == pytest.approx(numbers(member)[-1]['eval_return'])


def trace_epoch(learner):
  jax.eval_shape(functools.partial(learner.jax_epoch, n_steps=learner.jax_epoch_steps),
                 learner.train_state, learner.task.carry, *learner.epoch_args(1))


# (config, its bindings, the traceable parameters its epoch reads): every one of rl.grid.TRACEABLE.
ON = ['train_rl.n_epochs = 0']
TRACED = [
    ('ppo_cartpole_jax', [], ['PPO.epsilon', 'PPO.entropy_coeff', 'policy/multifactor.constant',
                              'gae.lambda_']),
    ('ppo_cartpole_jax', ['train_rl.trainer_class = @A2C', 'A2C.n_interactions_per_epoch = 64',
                          'A2C.advantage_estimator = @td_lambda'],
     ['A2C.entropy_coeff', 'td_lambda.lambda_']),
    ('ppo_cartpole_jax', ['train_rl.trainer_class = @PPOJoint',
                          'PPOJoint.n_interactions_per_epoch = 64',
                          'PPOJoint.advantage_estimator = @gae',
                          'PPOJoint.added_policy_slice_length = 1'],
     ['PPOJoint.epsilon', 'PPOJoint.entropy_coeff', 'PPOJoint.value_loss_coeff']),
    ('ppo_cartpole_jax', ['train_rl.trainer_class = @A2CJoint',
                          'A2CJoint.n_interactions_per_epoch = 64',
                          'A2CJoint.advantage_estimator = @gae',
                          'A2CJoint.added_policy_slice_length = 1'],
     ['A2CJoint.entropy_coeff', 'A2CJoint.value_loss_coeff']),
    ('sac_pendulum_jax', ['SAC.hidden = (8,)', 'SAC.train_steps_per_epoch = 2',
                          'SAC.batch_size = 8', 'SAC.n_replay_epochs = 2'], ['SAC.tau']),
    ('td3_pendulum_jax', ['TD3.hidden = (8,)', 'TD3.train_steps_per_epoch = 2',
                          'TD3.batch_size = 8', 'TD3.n_replay_epochs = 2'], ['TD3.tau']),
]


def test_the_cases_below_cover_every_traceable_parameter():
  covered = {name.rpartition('/')[2] for _, _, names in TRACED for name in names}
  assert covered == {f'{c}.{p}' for c, params in grid_lib.TRACEABLE.items() for p in params}


@pytest.mark.parametrize('config,bindings,names', TRACED,
                         ids=[f'{c}-{n[0].partition(".")[0]}' for c, _, n in TRACED])
def test_every_traceable_parameter_reaches_the_epoch(config, bindings, names, tmp_path):
  """Each is read, traced, by the epoch of a config that has it: a grid of it would otherwise
  train every member with the lead's value (tracing refuses a value never read)."""
  values = {name: 0.25 for name in names}
  with experiment.prepared_run([os.path.join(ROOT, 'configs', config + '.gin')],
                               bindings + ON + grid_lib.cell_bindings(values),
                               str(tmp_path / 'run')) as prepared:
    learner = prepared.learner
    with traced_values.tracing({n: np.float32(v) for n, v in values.items()}, values):
      trace_epoch(learner)
    # A value gin gave the run otherwise than the grid says is refused where it is read.
    with pytest.raises(ConfigError, match='not the grid'):
      with traced_values.tracing({names[0]: np.float32(0.5)}, {names[0]: 0.5}):
        trace_epoch(learner)


def test_a_grid_that_cannot_be_one_program_is_refused_before_any_folder(tmp_path, monkeypatch):
  out = tmp_path / 'job'
  with pytest.raises(ConfigError, match='PPOJoint.epsilon was not used'):
    experiment.execute_seeds([PPO_JAX], BINDINGS, str(out), [0],
                             grid={'PPOJoint.epsilon': [0.1, 0.2]})
  assert not out.exists()
  monkeypatch.setattr(grid_lib, 'available_bytes', lambda: 2**20)
  with pytest.raises(ConfigError, match=r'the grid needs about .* GiB for its 4 members .* at '
                                        r'most \d+ members fit'):
    experiment.execute_seeds([PPO_JAX], BINDINGS, str(out), [0, 1],
                             grid={'PPO.epsilon': [0.1, 0.2]})
  assert not out.exists()


def test_the_command_line_refuses_a_bad_grid_in_one_line(tmp_path):
  out = tmp_path / 'job'
  result = cli(f'--config_file={PPO_JAX}', f'--output_dir={out}', '--seeds=0-1',
               '--grid=RLTask.gamma=[0.9, 0.99]')
  assert result.returncode == 2
  (line,) = result.stderr.strip().splitlines()
  assert line.startswith('rl.run: error: --grid RLTask.gamma: a grid varies only') and \
      'launch.sweep' in line
  assert 'a grid over RLTask.gamma, seeds 0-1 of' in result.stdout
  assert not out.exists()


def test_a_gymnasium_grid_runs_its_cells_one_after_another(tmp_path, capsys):
  out = tmp_path / 'job'
  trainers = experiment.execute_seeds([REINFORCE], TINY + ['train_rl.n_epochs = 1'], str(out),
                                      [0], grid={'multifactor.constant': [0.01, 0.02]})
  assert [t.epoch for t in trainers] == [1, 1]
  assert "the grid's 2 cells run one after another as separate runs" in capsys.readouterr().out
  assert sorted(os.listdir(out)) == ['multifactor.constant=0.01', 'multifactor.constant=0.02']


def test_a_grid_job_resumes_after_sigkill_bit_for_bit(tmp_path):
  grid = 'policy/multifactor.constant=[0.001, 0.003]'
  bindings = TINY_PPO_JAX + ['train_rl.n_epochs = 4', 'train_rl.checkpoint_every = 2',
                             'PPO.eval_every = 2']
  flags = [f'--config_file={PPO_JAX}', *[f'--config={b}' for b in bindings], f'--grid={grid}',
           '--seeds=0']
  # Held once the first member has saved epoch 2: the second member has not saved it.
  cells = ('policy_multifactor.constant=0.001', 'policy_multifactor.constant=0.003')
  killed = tmp_path / 'killed'
  resumed = killed_and_resumed_jax_run(flags, killed, killed / cells[0] / 'seed_0', 2, tmp_path)
  assert resumed.returncode == 0, resumed.stderr
  assert 'Resuming' in resumed.stdout
  # The straight job in this process: its programs compile as the processes' do.
  straight = tmp_path / 'straight'
  experiment.execute_seeds([PPO_JAX], bindings, str(straight), [0],
                           grid=grid_lib.parse_grid([grid]))
  for cell in cells:
    assert numbers(killed / cell / 'seed_0') == numbers(straight / cell / 'seed_0')
    assert len(numbers(straight / cell / 'seed_0')) == 4
  assert numbers(straight / cells[0] / 'seed_0') != numbers(straight / cells[1] / 'seed_0')
