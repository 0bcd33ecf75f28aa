"""Q-learning targets of DQN and DoubleDQN.

First on hand-computed batches (1-step, n-step, double; with terminal and
truncated steps) and the Huber and masked regression losses, then through
the task's real slices on a 3-step chain: every step is trained, only
termination stops the bootstrap, Double DQN bootstraps from the online
network's argmax, and the targets computed from two rows of a slice equal,
bit for bit, those computed from all of them.
"""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import batch_helpers
from value_trainer_helpers import TINY
from value_trainer_helpers import task_for
from rl.ops import advantages
from rl.ops import q_learning as value
from rl.algorithms.dqn import DQN
from rl.algorithms.dqn import DoubleDQN


def n_step_targets(rewards, values, dones, mask, gamma, n):
  """q_targets with td_k of margin n, for slices of n + 1 rows."""
  return value.q_targets(advantages.td_k(gamma=gamma, margin=n), rewards,
                         jnp.zeros_like(jnp.asarray(rewards)), values, dones, mask)


# -- targets on hand-computed batches -------------------------------------------------

GAMMA = 0.5


def rows(*xs):
  return jnp.array(xs, jnp.float32)


def one_step_slices():
  """Three slices of 2 rows (n = 1), 2 actions: rewards, dones, mask and Q_target.

  a: a middle step, r = 1, next state's Q_target = (5, 7)
  b: a terminal step, r = 3 (next row = final obs, mask 0), its Q_target unused
  c: a truncated step, r = 4, final obs Q_target = (2, 6)
  """
  rewards = rows([1, 2], [3, 0], [4, 0])
  dones = rows([0, 0], [1, 0], [0, 0])
  mask = rows([1, 1], [1, 0], [1, 0])
  q_target = jnp.array([[[0, 0], [5, 7]], [[0, 0], [100, 100]], [[0, 0], [2, 6]]],
                       jnp.float32)
  return rewards, dones, mask, q_target


def test_one_step_targets_bootstrap_after_truncation_but_not_after_termination():
  # a: y = 1 + 0.5 * 7 = 4.5; b: y = 3; c: y = 4 + 0.5 * 6 = 7
  rewards, dones, mask, q_target = one_step_slices()
  values = value.greedy_values(q_target)
  y = n_step_targets(rewards, values, dones, mask, GAMMA, 1)
  np.testing.assert_allclose(np.asarray(y)[:, 0], [4.5, 3.0, 7.0], rtol=1e-6)


def test_n_step_targets_stop_at_termination_and_bootstrap_from_final_observations():
  # Slices of 4 rows (n = 3), gamma 0.5.
  # e: three real steps then a bootstrap row with max Q 8:
  #    1 + 0.5 * 2 + 0.25 * 3 + 0.125 * 8 = 3.75
  # f: terminated at its second step: 1 + 0.5 * 2 = 2 (row 2's Q = 40 unused)
  # g: truncated after its second step, final obs (row 2) max Q 4:
  #    1 + 0.5 * 2 + 0.25 * 4 = 3
  # h: terminal first step: 5 (the padding's Q never counts)
  rewards = rows([1, 2, 3, 0], [1, 2, 0, 0], [1, 2, 0, 0], [5, 0, 0, 0])
  dones = rows([0, 0, 0, 0], [0, 1, 0, 0], [0, 0, 0, 0], [1, 0, 0, 0])
  mask = rows([1, 1, 1, 1], [1, 1, 0, 0], [1, 1, 0, 0], [1, 0, 0, 0])
  q = np.zeros((4, 4, 2), np.float32)
  q[0, 3] = [8, 1]
  q[1, 2] = [40, 40]
  q[2, 2] = [4, 2]
  q[3, 1:] = 50
  y = n_step_targets(rewards, value.greedy_values(jnp.asarray(q)), dones, mask,
                           GAMMA, 3)
  assert y.shape == (4, 1)
  np.testing.assert_allclose(np.asarray(y)[:, 0], [3.75, 2.0, 3.0, 5.0], rtol=1e-6)


def test_double_dqn_evaluates_the_online_networks_action_with_the_target_network():
  # Next-state Q_target = (5, 7) and (2, 6); the online net prefers action 0
  # in both, so the bootstraps are 5 and 2 instead of max = 7 and 6:
  # middle step 1 + 0.5 * 5 = 3.5, truncated step 4 + 0.5 * 2 = 5; the
  # terminal step stays 3.
  rewards, dones, mask, q_target = one_step_slices()
  q_online = jnp.array([[[0, 0], [1, 0]], [[0, 0], [0, 1]], [[0, 0], [3, -1]]], jnp.float32)
  values = value.double_q_values(q_target, q_online)
  np.testing.assert_allclose(np.asarray(values)[:, 1], [5, 100, 2])
  y = n_step_targets(rewards, values, dones, mask, GAMMA, 1)
  np.testing.assert_allclose(np.asarray(y)[:, 0], [3.5, 3.0, 5.0], rtol=1e-6)


def test_huber_and_the_masked_regression_loss():
  np.testing.assert_allclose(value.huber(jnp.array([0.5, -0.5, 2.0, -3.0])),
                             [0.125, 0.125, 1.5, 2.5])
  # Q(s, a) of the taken actions: 1 and 4; targets 0 and 1; a padded row
  # (mask 0) with a huge error that must not count.
  q = jnp.array([[[1.0, 9.0]], [[0.0, 4.0]], [[100.0, 100.0]]])
  actions = jnp.array([[0], [1], [0]])
  targets = jnp.array([[0.0], [1.0], [-100.0]])
  mask = jnp.array([[1.0], [1.0], [0.0]])
  # Huber: (0.5 * 1 + (3 - 0.5)) / 2 = 1.5; squared: (1 + 9) / 2 = 5.
  assert float(value.q_regression_loss(q, actions, targets, mask)) == pytest.approx(1.5)
  assert float(value.q_regression_loss(q, actions, targets, mask, smooth=False)) == \
      pytest.approx(5.0)


# -- targets through the task's slices ---------------------------------------------------

def constant_q_target(trainer, q_per_action):
  """A target network whose Q-values (return units) are q_per_action everywhere."""
  scale = trainer._value_scale
  variables = trainer.learner.networks['value'].variables
  params = jax.tree_util.tree_map(jnp.zeros_like, variables['params'])
  params['quality_head']['bias'] = jnp.asarray(q_per_action, jnp.float32) / scale
  return dict(variables, params=params)


def chain_of_three(terminate):
  """A task on the 3-step chain, gamma 0.5: terminated after step 2, or truncated there."""
  kwargs = {'env_kwargs': {'length': 3, 'terminate': terminate}, 'gamma': GAMMA}
  if not terminate:
    kwargs['time_limit'] = 3
  return task_for('rl_test/Chain-v0', **kwargs)


@pytest.mark.parametrize('terminate', [True, False], ids=['terminated', 'truncated'])
def test_every_step_is_trained_and_only_termination_stops_the_bootstrap(terminate):
  # Chain of 3 steps (obs t, reward t + 1), gamma 0.5: either it terminates
  # after step 2, or a time limit of 3 truncates it there.
  task = chain_of_three(terminate)
  trainer = DQN(task, **dict(TINY, n_interactions_per_epoch=6, value_batch_size=64))
  trainer.learner.collect(n_interactions=6)
  # max Q = 2 everywhere
  obs, actions, targets, mask = batch_helpers.value_batch(
      trainer, target=constant_q_target(trainer, [2.0, 1.0]))
  assert obs.shape == (64, 1, 1) and targets.shape == mask.shape == (64, 1)
  assert np.all(np.asarray(mask) == 1)
  t = np.asarray(obs)[:, 0, 0].astype(int)
  # Uniform over the 3 steps of each trajectory: the last one is trained too.
  assert set(t) == {0, 1, 2}
  # y_t = (t + 1) + 0.5 * 2, except a terminal last step: y_2 = 3.
  expected = (t + 1) + GAMMA * 2.0
  if terminate:
    expected = np.where(t == 2, 3.0, expected)
  np.testing.assert_allclose(np.asarray(targets)[:, 0] * trainer._value_scale, expected,
                             rtol=1e-6)


# Two-step targets on the 3-step chain (gamma 0.5, max Q 2 everywhere):
# t = 0: 1 + 0.5 * 2 + 0.25 * 2 = 2.5 either way; at t = 1 and 2 the window
# reaches the end: terminated, 2 + 0.5 * 3 = 3.5 and 3; truncated, the final
# observation bootstraps: 2 + 0.5 * 3 + 0.25 * 2 = 4 and 3 + 0.5 * 2 = 4.
TWO_STEP = {True: {0: 2.5, 1: 3.5, 2: 3.0}, False: {0: 2.5, 1: 4.0, 2: 4.0}}


@pytest.mark.parametrize('terminate', [True, False], ids=['terminated', 'truncated'])
def test_two_step_targets_through_the_task(terminate):
  task = chain_of_three(terminate)
  trainer = DQN(task, max_slice_length=3, **dict(TINY, n_interactions_per_epoch=6,
                                                  value_batch_size=64))
  trainer.learner.collect(n_interactions=6)
  obs, _, targets, mask = batch_helpers.value_batch(
      trainer, target=constant_q_target(trainer, [2.0, 1.0]))
  t = np.asarray(obs)[:, 0, 0].astype(int)
  assert set(t) == {0, 1, 2} and np.all(np.asarray(mask) == 1)
  np.testing.assert_allclose(np.asarray(targets)[:, 0] * trainer._value_scale,
                             [TWO_STEP[terminate][i] for i in t], rtol=1e-6)


def test_double_dqn_targets_through_the_task_use_the_online_argmax():
  task = task_for('rl_test/Chain-v0', env_kwargs={'length': 3}, gamma=GAMMA)
  trainer = DoubleDQN(task, **dict(TINY, n_interactions_per_epoch=6, value_batch_size=16))
  trainer.learner.collect(n_interactions=6)
  # Target Q = (2, 1); the online net is made to prefer action 1 everywhere,
  # so Double DQN bootstraps from 1, not from max = 2.
  target = constant_q_target(trainer, [2.0, 1.0])
  online = constant_q_target(trainer, [0.0, 5.0])
  trainer.value_net.model_weights = online['params']
  obs, _, targets, _ = batch_helpers.value_batch(trainer, target=target)
  t = np.asarray(obs)[:, 0, 0].astype(int)
  expected = np.where(t == 2, 3.0, (t + 1) + GAMMA * 1.0)
  np.testing.assert_allclose(np.asarray(targets)[:, 0] * trainer._value_scale, expected,
                             rtol=1e-6)


@pytest.mark.parametrize('trainer_class', [DQN, DoubleDQN])
def test_targets_from_two_rows_equal_those_from_every_row_bit_for_bit(trainer_class):
  # DQN evaluates its networks only on each slice's first row and the row its
  # n-step target bootstraps from; the targets must be exactly those of the
  # networks run on all n + 1 rows, whatever the terminations and cuts.
  task = task_for('CartPole-v1')
  trainer = trainer_class(task, max_slice_length=5, **TINY)
  rng = np.random.default_rng(0)
  shape = (64, 5)
  fields = {'observation': jnp.asarray(rng.normal(size=shape + (4,)), jnp.float32),
            'reward': jnp.asarray(rng.normal(size=shape), jnp.float32),
            'return_': jnp.zeros(shape, jnp.float32),
            'done': jnp.asarray(rng.random(shape) < 0.15, jnp.float32),
            'mask': jnp.asarray(rng.random(shape) < 0.85, jnp.float32)}
  online = trainer.learner.networks['value'].variables
  target = jax.tree_util.tree_map(lambda x: x * 1.5 + 0.1, online)
  # Both sides compiled, as the trainer's targets are: op by op, XLA may round a step
  # of the n-step sum otherwise than a compiled program does.
  @jax.jit
  def every_row_targets(target, online, fields):
    obs = fields['observation']
    q_target = trainer._q_values(target, obs)
    if trainer_class is DoubleDQN:
      values = value.double_q_values(q_target, trainer._q_values(online, obs))
    else:
      values = value.greedy_values(q_target)
    return value.q_targets(advantages.td_k(task.gamma, 4), fields['reward'],
                           fields['return_'], values, fields['done'], fields['mask'])
  every_row = every_row_targets(target, online, fields)
  two_rows = jax.jit(trainer.targets)(target, online, fields)
  assert len(np.unique(np.asarray(trainer._estimator.bootstrap_row(
      fields['done'], fields['mask'])))) == 5  # every offset 0..4 occurs
  np.testing.assert_array_equal(two_rows, every_row)
