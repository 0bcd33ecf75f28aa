"""The latest epochs' trajectories on the device, a ring of fixed-size slots, one per epoch.

A replay of many epochs (DQN's, SAC's) is read by every training epoch, but
only its newest epoch is new. Keeping the epochs on the device in a ring of
slots, each padded to the same rows, writes that one epoch per training epoch
instead of copying the whole replay, and keeps the training program's shapes
fixed. Both backends keep such a ring: the JAX-native task writes it inside
its compiled epoch (rl.envs.jax_task), the gymnasium task from the host
(`EpochRing`, for the off-policy trainers).

Flattened slot after slot (`replay_slices`), the ring is one SliceData whose
trajectories come in slot order and whose empty rows hold no trajectory, so
a batch draws the same trajectories and steps as from the same epochs
concatenated in that order (rl.data.slices draws by the trajectories'
cumulative slice counts, which padding does not change).
"""
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from rl import compiler
from rl.data import slices


class Replay(NamedTuple):
  """A ring of SliceData, one slot an epoch.

  Every leaf of `epochs` has a leading slot axis [S, ...]; epoch e goes to
  slot e mod n_epochs (the slots past n_epochs, which round S up to a power
  of two so that the flattened rows are one, stay empty). Empty slots hold
  no trajectories (traj_rows 0), so nothing is ever drawn from them.
  """
  epochs: slices.SliceData
  written: jax.Array  # epochs stored so far


def empty_replay(data, n_epochs):
  """A Replay of `n_epochs` epochs shaped like the SliceData `data` (pure)."""
  n_slots = 1 << max(0, (n_epochs - 1).bit_length())
  epochs = jax.tree_util.tree_map(
      lambda x: jnp.zeros((n_slots,) + x.shape, x.dtype), data)
  return Replay(epochs, jnp.zeros((), jnp.int32))


def put(replay, slot, data):
  """`replay` with `data` in `slot` (pure)."""
  epochs = jax.tree_util.tree_map(lambda ring, x: ring.at[slot].set(x), replay.epochs, data)
  return replay._replace(epochs=epochs, written=replay.written + 1)


def remember(replay, data, n_epochs):
  """`replay` (of `n_epochs` epochs) with `data` in the next slot, the oldest epoch's (pure)."""
  return put(replay, replay.written % n_epochs, data)


def replay_slices(replay):
  """Every stored epoch of `replay` as one SliceData, slot after slot (pure)."""
  epochs = replay.epochs
  n_slots, size = epochs.row_end.shape
  offset = (jnp.arange(n_slots, dtype=jnp.int32) * size)[:, None]
  flat = lambda x: x.reshape((-1,) + x.shape[2:])  # noqa: E731
  return slices.SliceData(
      jax.tree_util.tree_map(flat, epochs.rows),
      flat(jnp.where(epochs.row_end > 0, epochs.row_end + offset, 0)),
      flat(epochs.traj_start + offset), flat(epochs.traj_rows))


def as_slices(data):
  """A Replay flattened by `replay_slices`; any other data (a SliceData) as it is."""
  return replay_slices(data) if isinstance(data, Replay) else data


# The slot is donated: a write updates the ring in place rather than copying it.
_put = compiler.jit(put, donate_argnums=0)


class EpochRing:
  """The gymnasium task's stored epochs mirrored on the device as a Replay.

  Epoch id k (ids count from 1) lives in slot (k - 1) mod n_epochs, so the
  slots hold the kept epochs oldest first until the ring wraps, and a ring
  rebuilt from the same kept epochs (after a restore) is the same ring. A
  slot holds the rows of the largest epoch seen, rounded up to a power of
  two; an epoch with more rebuilds the ring with larger slots (and the
  program reading it compiles again).
  """

  def __init__(self, n_epochs):
    self.n_epochs = int(n_epochs)
    self.replay = None
    self.slot_rows = 0

  def slot(self, epoch_id):
    return (epoch_id - 1) % self.n_epochs

  def update(self, epochs, epoch_id=None):
    """Writes stored epoch `epoch_id` of `epochs` (id -> EpochData); None: every one.

    A ring not made yet, or an epoch too large for its slots, (re)makes it with every epoch.
    """
    written = sorted(epochs) if epoch_id is None or self.replay is None else [epoch_id]
    rows = max(len(epochs[k].rows['mask']) for k in written)
    if self.replay is None or rows > self.slot_rows:
      # The epochs already written fit the old slots, so the new epochs' rows bound them all.
      self.slot_rows = max(self.slot_rows, 1 << max(1, (rows - 1).bit_length()))
      template = jax.tree_util.tree_map(np.zeros_like, self._padded(epochs[written[0]]))
      self.replay = compiler.jit(empty_replay, static_argnums=1)(template, self.n_epochs)
      written = sorted(epochs)
    for k in written:
      self.replay = _put(self.replay, self.slot(k), self._padded(epochs[k]))

  def _padded(self, data):
    """An EpochData as a SliceData of numpy arrays padded to `slot_rows`."""
    return slices.pad(data.rows, data.traj_start, data.traj_rows, size=self.slot_rows)
