"""Three epochs of one DQN: target syncs, the epsilon schedule, the replay and the state dict.

One trainer, compiled once and shared through a module fixture, records
every target sync inside its fused epochs: the held target is replaced
exactly at multiples of sync_freq global steps, across epoch boundaries,
while an 'epoch_start' target is rebuilt each epoch and never stored. The
same run checks the logged epsilon schedule, that the replay holds exactly
n_replay_epochs (padded to its final size from the first epoch), and that a
state dict round trip restores the lagging target network.
"""
import functools

import gin
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from value_trainer_helpers import TINY
from value_trainer_helpers import task_for
from value_trainer_helpers import trees_equal
from rl.data import slices
from rl.errors import ConfigError
from rl.optim import lr_schedules
from rl.learner import learner as learner_lib
from rl.algorithms.dqn import DQN


SCHEDULE = functools.partial(lr_schedules.multifactor, factors='constant * decay_every',
                             constant=0.8, decay_factor=0.5, steps_per_decay=2, minimum=0.15)


class SyncRecordingDQN(DQN):
  """A DQN that reports every target sync inside its fused epochs to the host.

  The target is synced inside the compiled loop (ValueAgent.synced, which
  its value_step calls after every update); a debug callback hands each step's
  result back, and a step whose returned target is the online network is a
  sync, recorded with the online step count and weights.
  """

  def __init__(self, task, synced, **kwargs):
    super().__init__(task, **kwargs)
    self._synced = synced

  def synced(self, target, variables, step):
    new = super().synced(target, variables, step)
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
  original = trainer.value_step
  epoch_start = {}  # the online step count as the epoch's training starts

  def start(step, carry_params, online_params):
    if int(step) != epoch_start['step']:
      return  # not the epoch's first gradient step
    starts.append(jax.device_get(carry_params))
    if trees_equal(carry_params, online_params):
      synced.append((int(step), jax.device_get(online_params)))

  def value_step(carry, rows, key):
    # The epoch's training starts from the target it is handed (the carry):
    # a sync when that is the online network as it stands.
    nets, target = carry
    net = nets['value']
    jax.debug.callback(start, net['step'], target['params'], net['params'])
    return original(carry, rows, key)
  trainer.value_step = value_step
  task.collect_initial()
  epochs = [{'buffer': sorted(task.epochs)}]
  for _ in range(3):
    epoch_start['step'] = online.step
    record = trainer.learner.run_epoch()
    jax.effects_barrier()  # every callback of the epoch has run
    synced.sort(key=lambda s: s[0])
    epochs.append({'record': record, 'syncs': [s for s, _ in synced],
                   'buffer': sorted(task.epochs), 'step': online.step,
                   'extra': jax.device_get(trainer.learner.extra), 'start': starts[-1],
                   'last_synced': synced[-1][1],
                   'online': jax.device_get(online.model_weights)})
  del trainer.value_step
  return trainer, epochs


@pytest.fixture(scope='module')
def three_epochs():
  """run_three_epochs of the default, held target (target_sync='global')."""
  yield run_three_epochs('global')
  gin.clear_config()


def test_synced_replaces_the_target_exactly_at_multiples_of_sync_freq(three_epochs):
  trainer, _ = three_epochs
  online = {'params': {'w': jnp.ones(3)}}
  target = {'params': {'w': jnp.zeros(3)}}
  sync = jax.jit(trainer.synced)
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
  DQN(task, n_replay_epochs=big, **TINY).build()
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
