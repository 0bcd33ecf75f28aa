"""Actor-critic trainers with Gaussian policies over Box actions.

The random initial trajectories store the density their actions were drawn
from (centred on the box, as wide as the uniform distribution over it); each
of A2C, PPO, AWR and SamplingAWR trains two finite epochs on Pendulum-v1, and
those epochs log the metrics the spec names for the trainer (the shared
losses and advantages, PPO's clipping, AWR's weights). The Pendulum epochs
are run once, in a module fixture, for both kinds of check.
"""
import math

import gin
import gymnasium as gym
import numpy as np
import pytest

from actor_critic_helpers import finite_numbers
from actor_critic_helpers import task_for
from actor_critic_helpers import tiny
from rl.algorithms import A2C
from rl.algorithms import AWR
from rl.algorithms import PPO
from rl.algorithms import SamplingAWR


class _OffsetBoxEnv(gym.Env):
  """A one-step-per-reward env whose Box actions live in [4, 10]^2, far from 0."""

  observation_space = gym.spaces.Box(-1.0, 1.0, (1,), np.float32)
  action_space = gym.spaces.Box(4.0, 10.0, (2,), np.float32)

  def reset(self, *, seed=None, options=None):
    super().reset(seed=seed)
    self._t = 0
    return np.zeros(1, np.float32), {}

  def step(self, action):
    self._t += 1
    return np.zeros(1, np.float32), 0.0, self._t >= 20, False, {}


if 'rl_test/OffsetBox-v0' not in gym.registry:
  gym.register('rl_test/OffsetBox-v0', entry_point=_OffsetBoxEnv)


@pytest.mark.parametrize('learn_std', [None, 'separate'])
def test_random_initial_box_actions_store_the_inputs_they_were_sampled_with(learn_std):
  """The stored dist_inputs of random trajectories are the density the actions came from.

  Off-policy losses (SamplingAWR's reweighting, probability ratios) read the
  behaviour policy from the stored inputs; inputs of 0 would claim N(0, std)
  for actions drawn around the middle of [4, 10].
  """
  gin.parse_config([f'Gaussian.learn_std = {learn_std!r}'])
  task = task_for('rl_test/OffsetBox-v0', initial_trajectories=40)
  trainer = AWR(task, **tiny())
  trainer.learner.collect_initial()
  data = task.epochs[0]
  real = data.rows['mask'] > 0
  actions = data.rows['action'][real]
  inputs = data.rows['dist_inputs'][real]
  assert len(actions) >= 800
  means, stds = trainer.dist._split(inputs)
  z = (actions - np.asarray(means)) / np.asarray(stds)
  # Standardised by the stored inputs, the actions are N(0, 1) draws.
  assert abs(z.mean()) < 0.1 and abs(z.std() - 1.0) < 0.1, (z.mean(), z.std())
  np.testing.assert_allclose(np.asarray(means), 7.0)  # the middle of [4, 10]
  if learn_std:
    # As wide as the uniform distribution over the box.
    np.testing.assert_allclose(np.asarray(stds), 6.0 / math.sqrt(12.0), rtol=1e-5)


# -- two epochs of each trainer on Pendulum-v1 --------------------------------------------

GAUSSIAN_TRAINERS = {
    'A2C': (A2C, {}),
    'PPO': (PPO, {}),
    'AWR': (AWR, {}),
    'SamplingAWR': (SamplingAWR, {'q_value_n_samples': 2}),
}


@pytest.fixture(scope='module')
def pendulum_records():
  """Two epochs of each trainer on Pendulum-v1 (Box actions), shared with the
  metric-name tests below so each trainer is compiled once."""
  records = {}
  for name, (cls, kwargs) in GAUSSIAN_TRAINERS.items():
    gin.clear_config()
    trainer = cls(task_for('Pendulum-v1'), **tiny(**kwargs))
    records[name] = [trainer.learner.run_epoch(), trainer.learner.run_epoch()]
    trainer.close()
  gin.clear_config()
  return records


@pytest.mark.parametrize('name', sorted(GAUSSIAN_TRAINERS))
def test_gaussian_policy_trains_two_epochs(pendulum_records, name):
  first, second = pendulum_records[name]
  assert second['epoch'] == 2 and second['env_steps'] == 32
  for record in (first, second):
    numbers = finite_numbers(record)
    assert 'value_loss' in numbers and 'policy_loss' in numbers
    bad = {k: v for k, v in numbers.items() if not math.isfinite(v)}
    assert not bad, f'{name}: non-finite metrics {bad}'


# -- the logged losses --------------------------------------------------------------------

BASE_METRICS = {'policy_loss', 'advantage_mean', 'advantage_std', 'value_loss', 'value_mean'}
EXTRA_METRICS = {
    'A2C': set(),
    'PPO': {'clip_fraction', 'approximate_kl_divergence'},
    'AWR': {'awr_weight_mean', 'awr_weight_std', 'awr_weight_min', 'awr_weight_max'},
    'SamplingAWR': {'awr_weight_mean', 'awr_weight_std', 'awr_weight_min',
                    'awr_weight_max'},
}


@pytest.mark.parametrize('name', sorted(EXTRA_METRICS))
def test_epoch_logs_the_spec_metrics(pendulum_records, name):
  record = pendulum_records[name][0]
  missing = (BASE_METRICS | EXTRA_METRICS[name]) - set(record)
  assert not missing, f'{name} does not log {sorted(missing)}'
  # Weights are exp(A / beta) capped at w_max: positive, ordered, <= 20.
  if 'awr_weight_min' in EXTRA_METRICS[name]:
    assert 0 < record['awr_weight_min'] <= record['awr_weight_mean'] \
        <= record['awr_weight_max'] <= 20.0
  if name == 'PPO':
    assert 0.0 <= record['clip_fraction'] <= 1.0
