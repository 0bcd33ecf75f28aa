"""Q-value baselines of AWR and SamplingAWR, and the aggregates of their sampled Q-values.

Each aggregate ('max', 'softmax', 'logsumexp', 'mean') trains a finite
epoch, and matches hand-computed values on one state (with a temperature,
and probability-weighted when every action is enumerated); the old boolean
q_value_aggregate_max is an alias of 'max'; SamplingAWR enumerates every
action when it asks for as many samples as there are actions.
"""
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import batch_helpers
from actor_critic_helpers import finite_numbers
from actor_critic_helpers import task_for
from actor_critic_helpers import tiny
from rl.algorithms import AWR
from rl.algorithms import SamplingAWR
from rl.ops import q_values


@pytest.mark.parametrize('aggregate', q_values.AGGREGATES)
def test_q_value_aggregates_train_an_epoch(aggregate):
  # policy_eval_steps=0 skips compiling the policy metrics (the policy train
  # loss is still checked for finiteness): the aggregate only affects values.
  trainer = AWR(task_for('CartPole-v1'), q_value=True, q_value_n_samples=3,
                q_value_aggregate=aggregate, **tiny(policy_eval_steps=0))
  # 3 samples of 2 actions: sampled from the stored policy, not enumerated.
  assert not trainer.q_baseline.sample_all
  record = trainer.learner.run_epoch()
  assert math.isfinite(record['value_loss'])
  assert all(math.isfinite(v) for v in finite_numbers(record).values())


def first_value_batch(**kwargs):
  """One value batch of a fresh Q-value AWR after one collection (seeded: repeatable)."""
  trainer = AWR(task_for('CartPole-v1'), q_value=True, q_value_n_samples=3, **tiny(**kwargs))
  trainer.learner.collect(n_interactions=16)
  return batch_helpers.value_batch(trainer)


def test_old_boolean_alias_of_the_aggregate():
  # ValueBatch(observation, action, target, mask); the targets carry the aggregate.
  alias_max = first_value_batch(q_value_aggregate_max=True)
  explicit_max = first_value_batch(q_value_aggregate='max')
  alias_mean = first_value_batch(q_value_aggregate_max=False)
  for a, b in zip(alias_max, explicit_max):
    np.testing.assert_array_equal(a, b)
  # Same data, same keys: only the aggregate differs, and max >= mean of the
  # same Q samples, so 'max' targets can only be higher.
  np.testing.assert_array_equal(alias_max.observation, alias_mean.observation)
  assert not np.array_equal(alias_max.target, alias_mean.target)
  assert np.all(np.asarray(alias_max.target) >= np.asarray(alias_mean.target) - 1e-6)


# One state, three sampled actions with Q = [1, 2, 1] and policy probabilities
# [1/2, 1/4, 1/4]; arrays are [B=1, n=3, L=1].
Q = jnp.array([1.0, 2.0, 1.0]).reshape(1, 3, 1)
LOG_P = jnp.log(jnp.array([0.5, 0.25, 0.25])).reshape(1, 3, 1)
E = math.e
HAND_COMPUTED = {
    # max(1, 2, 1)
    'max': 2.0,
    # softmax weights e^q / (e + e^2 + e) = (1, e, 1) / (2 + e);
    # sum w q = (1 + 2e + 1) / (2 + e) = (2 + 2e) / (2 + e) ~ 1.5761
    'softmax': (2 + 2 * E) / (2 + E),
    # log(e + e^2 + e) - log 3 = 1 + log(2 + e) - log 3 ~ 1.4528
    'logsumexp': 1 + math.log(2 + E) - math.log(3),
    # samples already come from the policy: plain mean (1 + 2 + 1) / 3
    'mean': 4 / 3,
}
# Jitted: one compile per mode, where op by op each of its ops compiles.
aggregate = jax.jit(q_values.aggregate, static_argnames=('mode', 'sample_all'))


@pytest.mark.parametrize('mode', sorted(HAND_COMPUTED))
def test_aggregate_by_hand(mode):
  value = aggregate(Q, LOG_P, mode)
  assert value.shape == (1, 1)
  np.testing.assert_allclose(float(value[0, 0]), HAND_COMPUTED[mode], rtol=1e-6)


def test_aggregate_mean_over_all_actions_is_probability_weighted():
  # Enumerated actions are weighted by the policy: 1/2 * 1 + 1/4 * 2 + 1/4 * 1 = 1.25
  # (not the plain mean 4/3).
  value = aggregate(Q, LOG_P, 'mean', sample_all=True)
  np.testing.assert_allclose(float(value[0, 0]), 1.25, rtol=1e-6)


def test_aggregate_temperature():
  # T = 2: softmax weights e^(q/2) = (e^.5, e, e^.5);
  # logsumexp: 2 * (log(2 e^.5 + e) - log 3).
  soft = (2 * math.exp(0.5) + 2 * E) / (2 * math.exp(0.5) + E)
  lse = 2 * (math.log(2 * math.exp(0.5) + E) - math.log(3))
  np.testing.assert_allclose(float(aggregate(Q, LOG_P, 'softmax', 2.0)[0, 0]), soft,
                             rtol=1e-6)
  np.testing.assert_allclose(float(aggregate(Q, LOG_P, 'logsumexp', 2.0)[0, 0]),
                             lse, rtol=1e-6)


def test_aggregate_rejects_an_unknown_mode():
  with pytest.raises(ValueError, match='unknown q_value_aggregate'):
    q_values.aggregate(Q, LOG_P, 'median')


# -- sampling every action ----------------------------------------------------------------

def test_sampling_awr_enumerates_all_actions_when_n_samples_is_the_action_count():
  trainer = SamplingAWR(task_for('CartPole-v1'), q_value_n_samples=2, **tiny())
  assert trainer.q_baseline.sample_all
  record = trainer.learner.run_epoch()
  assert all(math.isfinite(v) for v in finite_numbers(record).values())
  # More samples than actions: drawn from the policy, with repeats.
  other = SamplingAWR(task_for('CartPole-v1'), q_value_n_samples=3, **tiny())
  assert not other.q_baseline.sample_all
