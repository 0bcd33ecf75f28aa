"""Slices of stored trajectories, sampled on the device inside jitted training.

The task keeps an epoch's trajectories as flat rows plus offsets (see
rl.data.trajectories). For training, the selected epochs are padded to a capacity bucket
and moved to the device once per epoch as a `SliceData`; every gradient step
then draws its batch with `sample`, a pure function of (data, key), inside
the same compiled loop as the update. The capacities grow in steps of four,
so a replay buffer that fills over a run recompiles the loop a handful of
times rather than every epoch.

A trajectory with R rows (steps + 1) has max(1, R + margin - W) slices of
window W (start positions 0, 1, ...); the `margin` extra rows at the end of
a slice only serve to bootstrap. Trajectories are drawn in proportion to
their slice counts (or uniformly), then a start uniformly; a slice is padded
to `length` >= W rows with mask 0.

Stacked observations (RLTask.num_stacked_frames > 1) are stored one frame per
row (rl.data.frames): a SliceData then holds the frames apart and each row the
indices of its observation's frames, and every gather of rows rebuilds
their observations (`observations`, and `sample` for its slices).
"""
import math
from typing import Any, NamedTuple

import flax.struct
import jax
import jax.numpy as jnp
import numpy as np

from rl.data import frames as frames_lib

# The smallest padded row capacity; capacities are MIN_ROWS * 4^k up to
# FINE_ROWS, then powers of two. 512: an on-policy epoch of 256 steps (and
# its few final-observation rows) fits, and the per-chunk preparation, which
# runs over every padded row, does not spend most of its time on padding.
MIN_ROWS = 512
GROWTH = 4
# Above this, a 4x step would pad a large replay buffer to up to 4 times its
# size (e.g. 300k pixel rows to 1M); doubling halves that at the price of a
# few more recompiles over a run. (Replay trainers reserve their full size
# up front anyway: TaskNeeds.reserved_rows.)
FINE_ROWS = MIN_ROWS * GROWTH ** 3


def capacity(n_rows):
  """The padded row count for `n_rows` rows.

  The smallest MIN_ROWS * GROWTH^k >= n_rows up to FINE_ROWS, above it the
  smallest power of two.
  """
  size = MIN_ROWS
  while size < n_rows:
    size *= GROWTH if size < FINE_ROWS else 2
  return size


def whole_window(max_rows):
  """Window of whole-trajectory slices: the next power of two of the longest (>= 2)."""
  return 1 << int(math.ceil(math.log2(max(2, int(max_rows)))))


@flax.struct.dataclass
class SliceData:
  """Padded trajectories on the device.

  rows: field -> [capacity, ...] (padding rows are zeros with mask 0).
  row_end: [capacity] one past the last row of each row's trajectory (0 for
    padding rows): the rows r..row_end[r] - 1 are r's own future.
  traj_start, traj_rows: [capacity // 2] first row and row count of each
    trajectory; padding trajectories have 0 rows, so no slice is drawn from
    them (every real trajectory has at least 2 rows: a step and its final
    observation, hence at most capacity // 2 of them).
  max_rows: rows of the longest trajectory, rounded up by `whole_window`, when
    whole-trajectory slices are wanted (else None); static, so their shape
    is known at trace time, and None otherwise so that a new longest
    trajectory does not recompile samplers that never read it.
  frames: None: rows['observation'] holds each row's observation. Else
    [capacity, *frame] the stored frames (rl.data.frames: each row's newest
    frame, then the trajectories' context frames), and instead of
    'observation' rows['frame_index'] [capacity, n] holds the frames of
    each row's observation, oldest first; read observations with
    `observations` (or `sample`).
  """
  rows: Any
  row_end: jax.Array
  traj_start: jax.Array
  traj_rows: jax.Array
  max_rows: Any = flax.struct.field(pytree_node=False, default=None)
  frames: Any = None


def pad(rows, traj_start, traj_rows, whole_trajectories=False, context=None,
        traj_context=None, n_stacked=1, min_rows=0, size=None):
  """Numpy epoch arrays -> a SliceData of numpy arrays padded to the capacity bucket.

  whole_trajectories: also record `max_rows` for whole-trajectory slices.
  context, traj_context, n_stacked: for stacked observations stored as frames
  (rl.data.frames; rows['observation'] then holds each row's newest frame): the
  trajectories' context frames [K, *frame], how many each has, and the
  frames per observation. The capacity then holds the K context frames too.
  min_rows: the capacity holds at least this many (TaskNeeds.reserved_rows).
  size: the capacity itself, an even number at least the rows (None: the
    bucket of `capacity`).
  """
  n = len(rows['mask'])
  stacked = context is not None
  if size is None:
    size = capacity(max(n + (len(context) if stacked else 0), min_rows))
  padded = {}
  for name, column in rows.items():
    if stacked and name == 'observation':
      continue
    out = np.zeros((size,) + column.shape[1:], column.dtype)
    out[:n] = column
    padded[name] = out
  frames = None
  if stacked:
    frame_shape = rows['observation'].shape[1:]
    frames = np.zeros((size,) + frame_shape, rows['observation'].dtype)
    frames[:n] = rows['observation']
    frames[n:n + len(context)] = context
    padded['frame_index'] = np.zeros((size, n_stacked), np.int32)
    padded['frame_index'][:n] = frames_lib.frame_indices(traj_start, traj_rows, traj_context,
                                                         n, n_stacked)
  row_end = np.zeros(size, np.int32)
  row_end[:n] = np.repeat(np.asarray(traj_start) + np.asarray(traj_rows), traj_rows)
  starts = np.zeros(size // 2, np.int32)
  counts = np.zeros(size // 2, np.int32)
  starts[:len(traj_start)] = traj_start
  counts[:len(traj_rows)] = traj_rows
  max_rows = None
  if whole_trajectories:
    max_rows = whole_window(int(np.max(traj_rows)) if len(traj_rows) else 2)
  return SliceData(padded, row_end, starts, counts, max_rows, frames)


def observations(data, index=None):
  """The observations of rows `index` (an int array of any shape; None: all rows), pure.

  Stored observations are gathered; stacked ones rebuilt from their frames.
  """
  if data.frames is None:
    column = data.rows['observation']
    return column if index is None else column[index]
  frame_index = data.rows['frame_index']
  return frames_lib.stack(data.frames, frame_index if index is None else frame_index[index])


# Observation bytes the value network reads per call when `row_values`
# evaluates every stored row: above this the rows go through it in blocks, so
# that the observations (rebuilt stacks of pixels) and their activations stay
# bounded. 1024 rows of 84x84x4 Atari frames fit; the vector observations of
# the shipped configs (16 bytes for CartPole: 2M rows) go in one call.
VALUE_BLOCK_BYTES = 32 * 2**20


def block_rows(row_bytes, budget):
  """Rows per block: the largest power of two whose observations fit in `budget` bytes (>= 1)."""
  rows = max(1, budget // max(1, int(row_bytes)))
  return 1 << (rows.bit_length() - 1)


def row_values(data, observation_space, key, state_values):
  """Every stored row's state value, [capacity], computed once rather than for every batch.

  state_values(obs [B, 1, ...], dist_inputs [B, 1, ...], key) -> [B, 1] is
  the value network held fixed. In one call when the rows' observations fit
  in VALUE_BLOCK_BYTES, else in blocks of rows one after the other (each with
  its own key, folded in from `key`), so that memory stays bounded whatever
  the buffer holds.
  """
  size = data.row_end.shape[0]
  row_bytes = (int(np.prod(observation_space.shape, dtype=np.int64)) *
               observation_space.dtype.itemsize)
  block = block_rows(row_bytes, VALUE_BLOCK_BYTES)
  if size <= block:
    return state_values(observations(data)[:, None], data.rows['dist_inputs'][:, None], key)[:, 0]

  def block_values(args):
    i, index = args
    return state_values(observations(data, index)[:, None],
                        data.rows['dist_inputs'][index][:, None], jax.random.fold_in(key, i))[:, 0]
  n_blocks = size // block  # both powers of two
  index = jnp.arange(size).reshape(n_blocks, block)
  return jax.lax.map(block_values, (jnp.arange(n_blocks), index)).reshape(size)


def windows(data, columns, width):
  """[capacity, width] windows of per-row `columns` starting at every row (pure).

  Row r's window holds rows r..r + width - 1 of its own trajectory, zeros
  past the trajectory's end: the slice of `width` rows that starts at r. It
  lets per-row quantities (e.g. every step's advantage) be computed once for
  all rows rather than for every sampled batch.

  Args:
    data: a SliceData.
    columns: dict name -> [capacity, ...] per-row arrays.
    width: rows per window.

  Returns:
    dict name -> [capacity, width, ...].
  """
  size = data.row_end.shape[0]
  index = jnp.arange(size)[:, None] + jnp.arange(width)[None, :]
  valid = index < data.row_end[:, None]
  index = jnp.where(valid, index, 0)
  out = {}
  for name, column in columns.items():
    taken = column[index]
    keep = valid.reshape(valid.shape + (1,) * (taken.ndim - 2))
    out[name] = jnp.where(keep, taken, jnp.zeros((), taken.dtype))
  return out


def row_advantages(data, values, estimator):
  """Every stored row's advantage [capacity] under an rl.ops.advantages.Estimator.

  Each row gets the advantage a slice starting at it would get, from the
  rows' values [capacity]: an estimator's `every_row` form where it has one
  (GAE: log2(margin) vectorised passes), else the estimator on every row's
  `windows` of margin + 1 rows.
  """
  rows = data.rows
  if estimator.every_row is not None:
    follows = jnp.arange(1, data.row_end.shape[0] + 1) < data.row_end
    return estimator.every_row(rows['reward'], values, rows['done'], rows['mask'], follows)
  window = windows(data, {'reward': rows['reward'], 'return_': rows['return_'], 'value': values,
                          'done': rows['done'], 'mask': rows['mask']}, estimator.margin + 1)
  return estimator(window['reward'], window['return_'], window['value'], window['done'],
                   window['mask'])[:, 0]


def _slice_counts(traj_rows, window, margin):
  """Slices of trajectories of `traj_rows` rows (0 rows: padding, no slice).

  window None: whole-trajectory slices, one per trajectory.
  """
  real = traj_rows > 0
  if window is None:
    return real.astype(jnp.int32)
  return jnp.where(real, jnp.maximum(1, traj_rows + margin - window), 0)


class DrawTable(NamedTuple):
  """The trajectory of every slice number, for `sample(..., table=...)`.

  Slices are numbered trajectory after trajectory; drawing a number
  uniformly below `total` and looking its trajectory up is `sample`'s draw
  in proportion to the slice counts, with one gather where the search of
  the cumulative counts takes a loop of them (log2 of the trajectories).
  """
  total: jax.Array  # slices in all
  trajectory: jax.Array  # [capacity] the trajectory of slice d, for d < total


def draw_table(data, window=None, margin=0):
  """The DrawTable of `data`'s slices of `window` rows (None: whole trajectories); pure.

  Made once for the many batches drawn from the same data: it costs a pass
  over the capacity, about what a few batches' searches cost.
  """
  if window is not None and margin >= window:
    raise ValueError(f'a slice of {window} rows must train at least one: margin {margin} '
                     f'must be below the window.')
  cdf = jnp.cumsum(_slice_counts(data.traj_rows, window, margin))
  # Slice d belongs to the first trajectory whose cumulative count exceeds
  # d, i.e. to trajectory #{i: cdf[i] <= d}: mark every cumulative count and
  # add the marks up. A trajectory of R rows has at most R slices (margin <
  # window), so the numbers stay below the row capacity.
  size = data.row_end.shape[0]
  marks = jnp.zeros(size, jnp.int32).at[cdf].add(1, mode='drop')
  return DrawTable(cdf[-1], jnp.cumsum(marks))


class Drawn(NamedTuple):
  """Which rows a batch of slices holds: what `draw` picks and `take` gathers."""
  index: jax.Array  # [..., B, L] row of every slice position (0 where not valid)
  valid: jax.Array  # [..., B, L] the position holds a row of the slice's trajectory


def sample(data, key, batch_size, window=None, length=None, margin=0, uniform=False,
           table=None):
  """A dict field -> [batch_size, length, ...] of random slices (pure; jit-able).

  `take(data, draw(...))`: see `draw` for the arguments.
  """
  return take(data, draw(data, key, batch_size, window, length, margin, uniform, table))


def draw(data, key, batch_size, window=None, length=None, margin=0, uniform=False, table=None):
  """The rows of `batch_size` random slices (a Drawn; pure, jit-able).

  The random part of `sample`, apart from the gathers of `take`, so that a
  training loop can draw every step's slices first and gather them all at
  once (rl.learner.network_trainer).

  Args:
    data: a SliceData.
    key: a JAX PRNG key.
    batch_size: slices per batch.
    window: rows per slice, margin included; None: whole trajectories
      (window = data.max_rows).
    length: rows the slices are padded to (>= window); None: the window.
    margin: rows after the trained positions that only bootstrap.
    uniform: draw trajectories uniformly instead of by their slice counts.
    table: `draw_table(data, window, margin)`, made once for the many batches
      drawn from the same data; None makes it here (a one-off batch).
  """
  rows = data.traj_rows
  slice_window = window  # None: whole trajectories
  if window is None:
    window = data.max_rows
  length = window if length is None else max(window, length)
  traj_key, start_key = jax.random.split(key)
  if uniform:
    n_real = jnp.maximum(jnp.sum(rows > 0), 1)
    traj = jax.random.randint(traj_key, (batch_size,), 0, n_real)
  else:
    table = draw_table(data, slice_window, margin) if table is None else table
    number = jax.random.randint(traj_key, (batch_size,), 0, jnp.maximum(table.total, 1))
    traj = table.trajectory[number]
  n_slices = _slice_counts(rows[traj], slice_window, margin)
  start = jnp.floor(jax.random.uniform(start_key, (batch_size,)) * n_slices)
  start = start.astype(jnp.int32)
  position = jnp.arange(length)[None, :]
  offset = start[:, None] + position
  valid = (offset < rows[traj][:, None]) & (position < window)
  index = jnp.where(valid, data.traj_start[traj][:, None] + offset, 0)
  return Drawn(index, valid)


def take(data, drawn):
  """A dict field -> [..., B, L, ...] of the rows `drawn` picked, zeros where not valid (pure).

  Any leading axes of the Drawn carry over: many batches gather at once.
  """
  index, valid = drawn
  fields = {}
  for name, column in data.rows.items():
    if name != 'frame_index':
      fields[name] = _keep(column[index], valid)
  if data.frames is not None:
    fields['observation'] = _keep(observations(data, index), valid)
  return fields


def take_slices(prepared, drawn):
  """`take` from `prepared`, a pair (SliceData, its DrawTable) as an epoch's chunk holds it."""
  return take(prepared[0], drawn)


def _keep(taken, valid):
  """`taken` [..., B, L, ...] where `valid` [..., B, L], zeros elsewhere."""
  keep = valid.reshape(valid.shape + (1,) * (taken.ndim - valid.ndim))
  return jnp.where(keep, taken, jnp.zeros((), taken.dtype))
