"""DQN settings it cannot train with, rejected with a ConfigError.

Continuous actions are rejected naming the trainers that support them (in
one line when the runner reports them, before the output folder is made),
and temporal-difference targets need a look-ahead row in each slice.
"""
import pytest

from value_trainer_helpers import DQN_CONFIG
from value_trainer_helpers import TINY
from value_trainer_helpers import task_for
from rl.ops import advantages
from rl import experiment as run_lib
from rl.errors import ConfigError
from rl.algorithms.dqn import DQN


def test_continuous_actions_are_rejected_naming_the_trainers_that_support_them():
  with pytest.raises(ConfigError) as info:
    DQN(task_for('Pendulum-v1'), **TINY)
  message = str(info.value)
  for name in ('DQN needs a Discrete action space', 'PolicyGradientTrainer', 'A2C', 'PPO',
               'AWR', 'SamplingAWR'):
    assert name in message


def test_td_targets_need_a_look_ahead_row():
  with pytest.raises(ConfigError, match='max_slice_length must be >= 2'):
    DQN(task_for('CartPole-v1'), max_slice_length=1, **TINY)
  # Monte-Carlo targets need none.
  DQN(task_for('CartPole-v1'), max_slice_length=1, advantage_estimator=advantages.monte_carlo,
      **dict(TINY, n_interactions_per_epoch=None, n_trajectories_per_epoch=2))


def test_runner_reports_a_continuous_env_in_one_line(tmp_path):
  out = tmp_path / 'x'
  with pytest.raises(ConfigError) as info:
    run_lib.execute([DQN_CONFIG], ["RLTask.env = 'Pendulum-v1'"], str(out))
  assert '\n' not in str(info.value) and 'SamplingAWR' in str(info.value)
  assert not out.exists()
