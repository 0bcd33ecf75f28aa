"""DQN's epsilon-greedy acting.

The default exploration rate is the reference's max(0.99^epoch, 0.1);
EpsilonGreedy samples the greedy action with probability 1 - epsilon +
epsilon / n and every other one uniformly; collection acts epsilon-greedily
and stores the Q-values each action was chosen from, while evaluation acts
greedily.
"""
import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from value_trainer_helpers import TINY
from value_trainer_helpers import task_for
from rl.optim import lr_schedules
from rl.algorithms import dqn
from rl.ops import q_learning as value
from rl.algorithms.dqn import DQN


def test_default_exploration_rate_is_the_references():
  schedule = dqn.default_exploration_rate()
  # max(0.99^epoch, 0.1)
  for epoch in (0, 1, 10, 229, 230, 1000):
    assert float(schedule(epoch)) == pytest.approx(max(0.99 ** epoch, 0.1), rel=1e-5)


def test_epsilon_greedy_sampling():
  dist = value.EpsilonGreedy(4)
  sample = jax.jit(dist.sample, static_argnums=2)
  n = 8000
  q = jnp.tile(jnp.array([0.0, 3.0, 1.0, 2.0]), (n, 1))
  key = jax.random.PRNGKey(0)
  assert np.all(np.asarray(dist.sample(q, key, 0.0, 1.0)) == 1)  # temperature 0: greedy
  assert np.all(np.asarray(sample(q, key, 1.0, 0.0)) == 1)  # epsilon 0: greedy
  counts = np.bincount(np.asarray(sample(q, key, 1.0, 1.0)), minlength=4) / n
  np.testing.assert_allclose(counts, 0.25, atol=0.03)  # epsilon 1: uniform
  # epsilon 0.4: the greedy action 0.6 + 0.4 / 4, every other one 0.1.
  counts = np.bincount(np.asarray(sample(q, key, 1.0, 0.4)), minlength=4) / n
  np.testing.assert_allclose(counts, [0.1, 0.7, 0.1, 0.1], atol=0.03)


def collected(trainer):
  """Actions and stored Q-values (dist_inputs) of one collection of 16 steps."""
  trainer.learner.epoch = 1
  trainer.learner.collect(n_interactions=16)
  rows_ = trainer.task.epochs[1].rows
  real = rows_['mask'] > 0
  return rows_['action'][real], rows_['dist_inputs'][real]


def test_collection_is_epsilon_greedy_and_evaluation_greedy():
  never = functools.partial(lr_schedules.multifactor, factors='constant', constant=0.0)
  actions, q = collected(DQN(task_for('CartPole-v1'), exploration_rate=never, **TINY))
  # The stored dist_inputs are the Q-values the action was chosen from.
  assert np.array_equal(actions, q.argmax(-1))

  always = functools.partial(lr_schedules.multifactor, factors='constant', constant=1.0)
  trainer = DQN(task_for('CartPole-v1'), exploration_rate=always, **TINY)
  actions, q = collected(trainer)
  assert not np.array_equal(actions, q.argmax(-1))
  obs = np.random.default_rng(0).normal(size=(16, 4)).astype(np.float32)
  actions, q = trainer.learner.eval_policy(0.0, jax.random.PRNGKey(1))(obs)
  assert np.array_equal(actions, q.argmax(-1))
