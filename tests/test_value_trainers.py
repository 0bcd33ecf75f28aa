"""ValueAgent, DQN and DoubleDQN: targets, target syncs, replay, acting, resume.

Targets are checked on hand-computed batches (1-step, n-step, double; with
terminal and truncated steps), then through the task's real slices. The
trainers are tiny (2 envs, 8-wide nets, a few steps) because most of their
cost is jit compilation.
"""
import functools
import os
import shutil

import gin
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import batch_helpers
from rl.ops import advantages
from rl import experiment as run_lib
from rl.data import slices
from rl.data.checkpoints import Checkpointer
from rl.errors import ConfigError
from rl.metrics import TIMING_KEYS
from rl.metrics import read_metrics
from rl.optim import lr_schedules
from rl.envs.task import RLTask
from rl.algorithms import dqn
from rl.learner import learner as learner_lib
from rl.ops import q_learning as value
from rl.algorithms.dqn import DQN
from rl.algorithms.dqn import DoubleDQN


def n_step_targets(rewards, values, dones, mask, gamma, n):
  """q_targets with td_k of margin n, for slices of n + 1 rows."""
  return value.q_targets(advantages.td_k(gamma=gamma, margin=n), rewards,
                         jnp.zeros_like(jnp.asarray(rewards)), values, dones, mask)


ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DQN_CONFIG = os.path.join(ROOT, 'configs', 'dqn_cartpole.gin')

TINY_GIN = ['MLP.layer_widths = (8,)', "multifactor.factors = 'constant'",
            'multifactor.constant = 0.01']
TINY = dict(n_interactions_per_epoch=16, value_train_steps_per_epoch=2, value_batch_size=8)


pytestmark = pytest.mark.usefixtures('fast_compilation')


def task_for(env, **kwargs):
  gin.parse_config(TINY_GIN)
  return RLTask(env=env, n_envs=2, seed=0, **kwargs)


def trees_equal(a, b):
  if jax.tree_util.tree_structure(a) != jax.tree_util.tree_structure(b):
    return False
  return all(np.array_equal(x, y) for x, y in
             zip(jax.tree_util.tree_leaves(a), jax.tree_util.tree_leaves(b)))


def without_timing(records):
  return [{k: v for k, v in r.items() if k not in TIMING_KEYS} for r in records]


# -- 1. targets on hand-computed batches ----------------------------------------------

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


# -- 2. targets through the task's slices ------------------------------------------------

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
  trainer._value_trainer.model_weights = online['params']
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
  online = trainer._value_trainer.variables
  target = jax.tree_util.tree_map(lambda x: x * 1.5 + 0.1, online)
  obs = fields['observation']
  q_target = trainer._q_values(target, obs)
  if trainer_class is DoubleDQN:
    values = value.double_q_values(q_target, trainer._q_values(online, obs))
  else:
    values = value.greedy_values(q_target)
  every_row = value.q_targets(advantages.td_k(task.gamma, 4), fields['reward'],
                              fields['return_'], values, fields['done'], fields['mask'])
  two_rows = jax.jit(trainer.targets)(target, online, fields)
  assert len(np.unique(np.asarray(trainer._estimator.bootstrap_row(
      fields['done'], fields['mask'])))) == 5  # every offset 0..4 occurs
  np.testing.assert_array_equal(two_rows, every_row)


# -- 3. target sync, exploration, replay ---------------------------------------------------

SCHEDULE = functools.partial(lr_schedules.multifactor, factors='constant * decay_every',
                             constant=0.8, decay_factor=0.5, steps_per_decay=2, minimum=0.15)


class SyncRecordingDQN(DQN):
  """A DQN that reports every target sync inside its fused epochs to the host.

  The target is synced inside the compiled loop (ValueAgent._sync_every, the
  online trainer's after_step hook); a debug callback hands each step's
  result back, and a step whose returned target is the online network is a
  sync, recorded with the online step count and weights.
  """

  def __init__(self, task, synced, **kwargs):
    super().__init__(task, **kwargs)
    self._synced = synced

  def _sync_every(self, target, variables, step):
    new = super()._sync_every(target, variables, step)
    jax.debug.callback(self._record, step, new['params'], variables['params'])
    return new

  def _record(self, step, target_params, online_params):
    if trees_equal(target_params, online_params):
      self._synced.append((int(step), jax.device_get(online_params)))


def run_three_epochs(target_sync):
  """One trainer (compiled once) run for 3 epochs, with what each epoch did.

  4 steps an epoch in 2 chunks of 2, sync_freq 3, a replay of 2 epochs on
  top of a random warm-up epoch 0, and epsilon = max(0.8 * 0.5^(e // 2), 0.15).
  """
  gin.clear_config()
  task = task_for('CartPole-v1', initial_trajectories=2)
  synced = []  # (online step, params) at every sync
  starts = []  # the target each epoch's training starts from
  trainer = SyncRecordingDQN(
      task, synced, exploration_rate=SCHEDULE, n_replay_epochs=2, sync_freq=3,
      target_sync=target_sync,
      **dict(TINY, value_train_steps_per_epoch=4, value_evals_per_epoch=2))
  online = trainer.learner.networks['value']
  original = trainer.fit

  def start(step, carry_params, online_params):
    starts.append(jax.device_get(carry_params))
    if trees_equal(carry_params, online_params):
      synced.append((int(step), jax.device_get(online_params)))

  def fit(state, name, data, *args, carry=None, **kwargs):
    # The epoch's training starts from the target it is handed (the carry):
    # a sync when that is the online network as it stands.
    net = state.nets[name]
    jax.debug.callback(start, net['step'], carry['params'], net['params'])
    return original(state, name, data, *args, carry=carry, **kwargs)
  trainer.fit = fit
  task.collect_initial()
  epochs = [{'buffer': sorted(task.epochs)}]
  for _ in range(3):
    record = trainer.learner.run_epoch()
    jax.effects_barrier()  # every callback of the epoch has run
    synced.sort(key=lambda s: s[0])
    epochs.append({'record': record, 'syncs': [s for s, _ in synced],
                   'buffer': sorted(task.epochs), 'step': online.step,
                   'extra': jax.device_get(trainer.learner.extra), 'start': starts[-1],
                   'last_synced': synced[-1][1],
                   'online': jax.device_get(online.model_weights)})
  trainer.fit = original
  return trainer, epochs


@pytest.fixture(scope='module')
def three_epochs():
  """run_three_epochs of the default, held target (target_sync='global')."""
  yield run_three_epochs('global')
  gin.clear_config()


def test_sync_every_replaces_the_target_exactly_at_multiples_of_sync_freq(three_epochs):
  trainer, _ = three_epochs
  online = {'params': {'w': jnp.ones(3)}}
  target = {'params': {'w': jnp.zeros(3)}}
  sync = jax.jit(trainer._sync_every)
  for step in range(1, 10):
    new = sync(target, online, jnp.int32(step))
    expected = online if step % 3 == 0 else target
    assert trees_equal(jax.device_get(new), jax.device_get(expected)), step


def test_held_target_syncs_every_sync_freq_global_steps_across_epochs(three_epochs):
  _, epochs = three_epochs
  # 4 steps an epoch, sync_freq 3: the target is the online network at global
  # steps 0 (the initial copy), 3, 6, 9 and 12, and at no epoch start (4, 8).
  assert [e['step'] for e in epochs[1:]] == [4, 8, 12]
  assert epochs[1]['syncs'] == [0, 3]
  assert epochs[2]['syncs'] == [0, 3, 6]
  assert epochs[3]['syncs'] == [0, 3, 6, 9, 12]
  # Epoch 1 ends with step 3's weights (step 4 is no multiple of 3), and
  # epoch 2 starts from exactly that target, not the online network.
  assert trees_equal(epochs[1]['extra']['target']['params'], epochs[1]['last_synced'])
  assert not trees_equal(epochs[1]['extra']['target']['params'], epochs[1]['online'])
  assert trees_equal(epochs[2]['start'], epochs[1]['extra']['target']['params'])
  # Likewise epoch 3 starts from step 6's weights; step 12 ends it synced.
  assert trees_equal(epochs[3]['start'], epochs[2]['extra']['target']['params'])
  assert not trees_equal(epochs[3]['start'], epochs[2]['online'])
  assert trees_equal(epochs[3]['extra']['target']['params'], epochs[3]['online'])


def test_epoch_start_target_restarts_each_epoch_and_is_not_stored():
  _, epochs = run_three_epochs('epoch_start')
  gin.clear_config()
  # Epoch 1: the start (step 0), then step 3 inside the second chunk of 2.
  assert epochs[1]['syncs'] == [0, 3] and epochs[1]['step'] == 4
  # Epoch 2: the start (step 4), then step 6; step 8 is no multiple of 3.
  assert epochs[2]['syncs'] == [0, 3, 4, 6]
  # Epoch 3: the start (step 8), then step 9; 12 is one again.
  assert epochs[3]['syncs'] == [0, 3, 4, 6, 8, 9, 12]
  assert trees_equal(epochs[3]['start'], epochs[2]['online'])
  # Rebuilt every epoch, the target is kept nowhere between them.
  assert all('target' not in e['extra'] for e in epochs[1:])


def test_target_sync_must_be_a_known_mode():
  gin.clear_config()
  with pytest.raises(ConfigError, match="target_sync must be one of 'global', 'epoch_start'"):
    DQN(task_for('CartPole-v1'), target_sync='every_epoch', **TINY)


def test_exploration_rate_schedule_by_epoch(three_epochs):
  trainer, epochs = three_epochs
  expected = {1: 0.8, 2: 0.4, 3: 0.4, 4: 0.2, 6: 0.15, 50: 0.15}
  for epoch, epsilon in expected.items():
    assert trainer.exploration_rate(epoch) == pytest.approx(epsilon)
  logged = [e['record']['exploration_rate'] for e in epochs[1:]]
  np.testing.assert_allclose(logged, [0.8, 0.4, 0.4], rtol=1e-6)
  for key in ('value_loss', 'value_mean', 'returns_mean', 'train_value_loss'):
    assert np.isfinite(epochs[3]['record'][key])


def test_default_exploration_rate_is_the_references():
  schedule = dqn.default_exploration_rate()
  # max(0.99^epoch, 0.1)
  for epoch in (0, 1, 10, 229, 230, 1000):
    assert float(schedule(epoch)) == pytest.approx(max(0.99 ** epoch, 0.1), rel=1e-5)


def test_replay_holds_exactly_n_replay_epochs(three_epochs):
  trainer, epochs = three_epochs
  assert trainer.task.needs.n_replay_epochs == 2
  assert [e['buffer'] for e in epochs] == [[0], [0, 1], [1, 2], [2, 3]]


def test_a_replay_is_padded_to_its_final_size_from_the_first_epoch():
  gin.clear_config()
  task = task_for('CartPole-v1')
  # 300 epochs of 16 steps: 4,800 rows, the bucket of 8,192, from the first epoch.
  trainer = DQN(task, n_replay_epochs=300, **TINY)
  trainer.learner.epoch = 1
  trainer.learner.run_epoch()
  assert len(task.slice_data().row_end) == slices.capacity(300 * 16) == 8192
  # A replay above MAX_RESERVED_ROWS grows with its contents instead.
  gin.clear_config()
  task = task_for('CartPole-v1')
  big = 2 * learner_lib.MAX_RESERVED_ROWS // 16
  DQN(task, n_replay_epochs=big, **TINY)
  assert task.needs.reserved_rows == 0


def test_state_dict_round_trip_restores_the_target_network(three_epochs):
  trainer, _ = three_epochs
  # Make the target lag the online network (as after a mid-epoch sync).
  target = trainer.learner.extra['target']
  trainer.learner.extra = dict(trainer.learner.extra, target=dict(target, params=jax.tree_util.tree_map(
      lambda x: x + 1.0, target['params'])))
  arrays, meta = jax.device_get(trainer.state_dict())
  other = DQN(task_for('CartPole-v1', initial_trajectories=2), exploration_rate=SCHEDULE,
              n_replay_epochs=2, sync_freq=3,
              **dict(TINY, value_train_steps_per_epoch=4, value_evals_per_epoch=2))
  other.load_state_dict(arrays, meta)
  assert other.epoch == 3
  assert trees_equal(other.learner.extra['target'], trainer.learner.extra['target'])
  assert trees_equal(other.learner.networks['value'].model_weights,
                     trainer.learner.networks['value'].model_weights)
  # Epsilon is a function of the restored epoch counter.
  assert other.exploration_rate(other.epoch + 1) == trainer.exploration_rate(4) == \
      pytest.approx(0.2)


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


# -- 4. save / restore ---------------------------------------------------------------------

RUN = ['train_rl.checkpoint_every = 2', 'RLTask.n_envs = 2', 'RLTask.initial_trajectories = 2',
       'MLP.layer_widths = (8,)', 'DQN.n_interactions_per_epoch = 16',
       'DQN.value_train_steps_per_epoch = 3', 'DQN.value_batch_size = 8', 'DQN.sync_freq = 4',
       'DQN.n_eval_episodes = 2', 'DQN.eval_every = 1', 'DQN.max_slice_length = 3',
       # Fast epsilon decay so every epoch acts with a different epsilon.
       'exploration_rate/multifactor.decay_factor = 0.5']


def checkpoint_arrays(folder):
  step, arrays, _ = Checkpointer(os.path.join(folder, 'checkpoints')).restore_latest()
  return step, arrays


def test_resume_through_the_runner_is_bit_exact(tmp_path):
  straight = str(tmp_path / 'straight')
  run_lib.execute([DQN_CONFIG], RUN + ['train_rl.n_epochs = 4'], straight)
  # The same run as if it had died before its epoch-4 checkpoint: it resumes
  # from epoch 2, whose target network (synced at step 4) lags the online one
  # (step 6): 3 steps an epoch and sync_freq 4 don't align.
  resumed = str(tmp_path / 'resumed')
  shutil.copytree(straight, resumed)
  shutil.rmtree(os.path.join(resumed, 'checkpoints', '4'))
  step, arrays = checkpoint_arrays(resumed)
  assert step == 2
  assert not trees_equal(arrays['extra']['target']['params'],
                         arrays['trainers']['value']['params'])
  trainer = run_lib.execute([DQN_CONFIG], RUN + ['train_rl.n_epochs = 4'], resumed)
  assert trainer.epoch == 4 and trainer.learner.networks['value'].step == 12
  records = without_timing(read_metrics(straight))
  assert [r['epoch'] for r in records] == [1, 2, 3, 4]
  assert len({r['exploration_rate'] for r in records}) == 4
  assert without_timing(read_metrics(resumed)) == records
  step_a, arrays_a = checkpoint_arrays(straight)
  step_b, arrays_b = checkpoint_arrays(resumed)
  assert step_a == step_b == 4
  for part in (arrays_a['trainers'], arrays_a['extra'], arrays_a['collect']):
    assert jax.tree_util.tree_leaves(part)
  assert trees_equal(arrays_a['trainers'], arrays_b['trainers'])
  assert trees_equal(arrays_a['extra'], arrays_b['extra'])
  assert trees_equal(arrays_a['collect'], arrays_b['collect'])
  # Step 12 is a multiple of sync_freq: the saved target is the final online net.
  assert trees_equal(arrays_a['extra']['target']['params'],
                     arrays_a['trainers']['value']['params'])


# -- 5. bad input -------------------------------------------------------------------------

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
