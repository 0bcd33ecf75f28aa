"""Advantages and value targets of the actor-critic trainers.

PPO bootstraps every estimator (td_k, td_lambda, GAE) through the added
policy slice while its policy sees only the slice's own step; A2C's
Monte-Carlo value targets are the stored discounted returns; and the
row advantages take an estimator's every-row form, which gives the
same numbers as its windows.
"""
import dataclasses
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import batch_helpers
from actor_critic_helpers import TINY
from actor_critic_helpers import finite_numbers
from actor_critic_helpers import task_for
from actor_critic_helpers import tiny
from rl.ops import advantages
from rl.algorithms import A2C
from rl.algorithms import PPO


@pytest.mark.parametrize('estimator', [advantages.td_k, advantages.td_lambda, advantages.gae],
                         ids=['td_k', 'td_lambda', 'gae'])
def test_ppo_bootstraps_through_an_added_policy_slice(estimator):
  # No policy metrics (as in test_q_value_aggregates.py): the finite train
  # loss already depends on the estimator's advantages.
  trainer = PPO(task_for('CartPole-v1'), advantage_estimator=estimator,
                **tiny(max_slice_length=1, added_policy_slice_length=2, policy_eval_steps=0))
  record = trainer.learner.run_epoch()
  assert math.isfinite(record['train_policy_loss'])
  assert all(math.isfinite(v) for v in finite_numbers(record).values())
  # The margin rows only serve the estimator: the policy sees 1 step per slice.
  obs, actions, adv, old_dist_inputs, mask = batch_helpers.policy_batch(trainer)
  assert obs.shape == (4, 1, 4) and adv.shape == mask.shape == (4, 1)


def test_monte_carlo_value_targets_are_the_stored_returns():
  task = task_for('rl_test/Chain-v0', env_kwargs={'length': 3}, gamma=0.5)
  # Monte-Carlo returns are only taken on whole episodes.
  trainer = A2C(task, advantage_estimator=advantages.monte_carlo,
                **dict(TINY, added_policy_slice_length=0, n_interactions_per_epoch=None,
                       n_trajectories_per_epoch=2, value_batch_size=16))
  # 2 envs x 3 steps: each env plays exactly one whole episode.
  trainer.learner.collect(n_trajectories=2)
  obs, _, targets, mask = batch_helpers.value_batch(trainer)
  assert obs.shape == (16, 1, 1) and targets.shape == mask.shape == (16, 1)
  real = np.asarray(mask) > 0
  assert real.all()  # slices of length 1 start only on real steps
  # Rewards 1, 2, 3 at t = 0, 1, 2 with gamma 0.5:
  # G_2 = 3, G_1 = 2 + 0.5 * 3 = 3.5, G_0 = 1 + 0.5 * 3.5 = 2.75.
  by_hand = {0: 2.75, 1: 3.5, 2: 3.0}
  rows = task.epochs[1].rows
  stored = {int(o[0]): float(r) for o, r, m in
            zip(rows['observation'], rows['return_'], rows['mask']) if m}
  assert stored == by_hand
  t = np.asarray(obs)[:, 0, 0].astype(int)
  np.testing.assert_allclose(np.asarray(targets)[real],
                             np.array([stored[i] for i in t]), rtol=1e-6)


def test_row_advantages_take_the_estimators_every_row_form():
  """With GAE, every stored row's advantage comes from `every_row`, not from
  [capacity, margin + 1] windows; both give the same numbers, padding included."""
  from rl.data import slices  # pylint: disable=import-outside-toplevel
  rng = np.random.default_rng(0)
  lengths = [5, 1, 9, 3]  # steps; each trajectory also has its final-observation row
  n = sum(lengths) + len(lengths)
  mask = np.concatenate([np.r_[np.ones(k, np.float32), 0.0] for k in lengths])
  dones = np.concatenate([np.r_[np.zeros(k - 1, np.float32), 1.0, 0.0] for k in lengths])
  rows = {'reward': rng.normal(size=n).astype(np.float32), 'done': dones, 'mask': mask,
          'return_': rng.normal(size=n).astype(np.float32)}
  starts = np.cumsum([0] + [k + 1 for k in lengths[:-1]]).astype(np.int32)
  data = slices.pad(rows, starts, np.array([k + 1 for k in lengths], np.int32))
  values = jnp.asarray(rng.normal(size=data.row_end.shape[0]).astype(np.float32))
  estimator = advantages.gae(0.99, 4, 0.9)
  assert estimator.every_row is not None
  windowed = dataclasses.replace(estimator, every_row=None)  # the same estimator, windows only

  def row_advantages(form):
    # Jitted, as in the epoch: one compile, where op by op each op compiles.
    return jax.jit(lambda data, values: slices.row_advantages(data, values, form))(data, values)
  np.testing.assert_allclose(row_advantages(estimator), row_advantages(windowed), atol=1e-5)
