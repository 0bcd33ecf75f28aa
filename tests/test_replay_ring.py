"""The device ring of stored epochs (rl.data.replay_ring.EpochRing) that SAC and TD3 sample on
gymnasium envs: the same batches as the epochs concatenated, one slot written per epoch, and the
same ring when rebuilt after a restore."""
import jax
import numpy as np

from rl.data import replay_ring
from rl.data import slices
from rl.data.trajectories import EpochData


def epoch_data(rng, steps_per_trajectory):
  """An EpochData of trajectories of the given step counts (each plus its final row)."""
  rows = {'observation': [], 'action': [], 'reward': [], 'done': [], 'mask': [],
          'dist_inputs': [], 'return_': []}
  for steps in steps_per_trajectory:
    n = steps + 1
    rows['observation'].append(rng.normal(size=(n, 3)).astype(np.float32))
    rows['action'].append(rng.normal(size=(n, 1)).astype(np.float32))
    rows['reward'].append(rng.normal(size=n).astype(np.float32))
    rows['done'].append(np.zeros(n, np.float32))
    rows['mask'].append(np.r_[np.ones(steps), 0].astype(np.float32))
    rows['dist_inputs'].append(rng.normal(size=(n, 2)).astype(np.float32))
    rows['return_'].append(rng.normal(size=n).astype(np.float32))
  lengths = np.array([s + 1 for s in steps_per_trajectory], np.int64)
  starts = np.concatenate([[0], np.cumsum(lengths)[:-1]]).astype(np.int64)
  return EpochData({k: np.concatenate(v) for k, v in rows.items()}, starts, lengths)


def stored(ring, epochs, epoch_id, data, n_epochs):
  """What Trajectories.store does: keep epoch `epoch_id`, drop the aged-out, update the ring."""
  epochs[epoch_id] = data
  for old in [k for k in epochs if k <= epoch_id - n_epochs]:
    del epochs[old]
  ring.update(epochs, epoch_id)


@jax.jit
def batches(data, key):
  """A batch of 2-row slices with a bootstrap row, as the off-policy trainers draw them."""
  return slices.sample(data, key, 64, 2, margin=1, table=slices.draw_table(data, 2, 1))


def leaves_equal(a, b):
  return all(np.array_equal(x, y) for x, y in
             zip(jax.tree_util.tree_leaves(a), jax.tree_util.tree_leaves(b), strict=True))


def test_the_ring_draws_the_batches_of_the_epochs_concatenated_until_it_wraps():
  rng = np.random.default_rng(0)
  ring, epochs = replay_ring.EpochRing(4), {}
  for epoch_id, steps in enumerate([[30], [12, 18], [5, 20, 5]], start=1):
    stored(ring, epochs, epoch_id, epoch_data(rng, steps), 4)
  whole = EpochData.concatenate([epochs[k] for k in sorted(epochs)])
  concatenated = slices.pad(whole.rows, whole.traj_start, whole.traj_rows)
  for seed in range(3):
    key = jax.random.PRNGKey(seed)
    assert leaves_equal(batches(replay_ring.as_slices(ring.replay), key),
                        batches(concatenated, key))


def test_a_new_epoch_writes_its_slot_only_and_a_rebuilt_ring_is_the_same_ring():
  rng = np.random.default_rng(1)
  n_epochs = 3
  ring, epochs = replay_ring.EpochRing(n_epochs), {}
  for epoch_id in range(1, 6):  # epochs 1 and 2 age out; 4 and 5 take their slots
    before = jax.tree_util.tree_map(np.asarray, ring.replay)
    stored(ring, epochs, epoch_id, epoch_data(rng, [8, 7]), n_epochs)
    after = jax.tree_util.tree_map(np.asarray, ring.replay.epochs)
    slot = (epoch_id - 1) % n_epochs
    if before is not None:
      for old, new in zip(jax.tree_util.tree_leaves(before.epochs),
                          jax.tree_util.tree_leaves(after)):
        assert np.array_equal(np.delete(old, slot, axis=0), np.delete(new, slot, axis=0))
    assert np.array_equal(after.rows['observation'][slot][:17],
                          epochs[epoch_id].rows['observation'])
  assert sorted(epochs) == [3, 4, 5]
  rebuilt = replay_ring.EpochRing(n_epochs)
  rebuilt.update(epochs)  # as after a restore: every kept epoch at once
  assert leaves_equal(rebuilt.replay.epochs, ring.replay.epochs)
  # Four slots (three rounded up to a power of two); the fourth stays empty.
  assert ring.replay.epochs.traj_rows.shape[0] == 4
  assert not ring.replay.epochs.traj_rows[3].any()


def test_an_epoch_with_more_rows_than_a_slot_widens_every_slot_and_keeps_every_epoch():
  rng = np.random.default_rng(2)
  ring, epochs = replay_ring.EpochRing(3), {}
  stored(ring, epochs, 1, epoch_data(rng, [20]), 3)
  assert ring.slot_rows == 32
  stored(ring, epochs, 2, epoch_data(rng, [20, 20]), 3)  # 42 rows
  assert ring.slot_rows == 64
  data = replay_ring.as_slices(ring.replay)
  observations = np.asarray(data.rows['observation'])[np.asarray(data.rows['mask']) > 0]
  expected = np.concatenate([epochs[k].rows['observation'][epochs[k].rows['mask'] > 0]
                             for k in (1, 2)])
  assert np.array_equal(observations, expected)
  assert int(data.traj_rows.sum()) == 21 + 42
