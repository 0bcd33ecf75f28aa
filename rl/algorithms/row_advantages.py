"""Every stored step's value and advantage, computed once for all rows.

While a chunk of an actor-critic epoch holds its value network fixed, each
stored step's value and advantage are computed once at the chunk's start
(each step looking `margin` steps ahead), and the chunk's batches gather
them, instead of recomputing them for every sampled slice.
"""
import jax
import jax.numpy as jnp
import numpy as np

from rl.data import slices

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
  """Every stored row's state value, [capacity].

  state_values(obs [B, 1, ...], dist_inputs [B, 1, ...], key) -> [B, 1] is
  the value network held fixed. In one call when the rows' observations fit
  in VALUE_BLOCK_BYTES, else in blocks of rows one after the other (each with
  its own key, folded in from `key`), so that memory stays bounded whatever
  the buffer holds.
  """
  rows = data.rows
  size = data.row_end.shape[0]
  row_bytes = (int(np.prod(observation_space.shape, dtype=np.int64)) *
               observation_space.dtype.itemsize)
  block = block_rows(row_bytes, VALUE_BLOCK_BYTES)
  if size <= block:
    return state_values(slices.observations(data)[:, None],
                        rows['dist_inputs'][:, None], key)[:, 0]

  def block_values(args):
    i, index = args
    return state_values(slices.observations(data, index)[:, None],
                        rows['dist_inputs'][index][:, None], jax.random.fold_in(key, i))[:, 0]
  n_blocks = size // block  # both powers of two
  index = jnp.arange(size).reshape(n_blocks, block)
  return jax.lax.map(block_values, (jnp.arange(n_blocks), index)).reshape(size)


def windowed_advantages(data, values, estimator, margin):
  """Every stored step's advantage, [capacity], from every row's value [capacity].

  The estimator runs on each row's window of the `margin` rows that follow it
  in its trajectory (`slices.windows`): the advantage a slice starting at that
  row would get, computed once for all rows instead of for every batch.
  An estimator with an `every_row` form (GAE) computes the same numbers
  without the [capacity, margin + 1] windows, in log2(margin) vectorised
  passes rather than margin scan steps over every row.
  """
  rows = data.rows
  every_row = getattr(estimator, 'every_row', None)
  if every_row is not None:
    follows = jnp.arange(1, data.row_end.shape[0] + 1) < data.row_end
    return every_row(rows['reward'], values, rows['done'], rows['mask'], follows)
  window = slices.windows(data, {'reward': rows['reward'], 'return_': rows['return_'],
                                 'value': values, 'done': rows['done'],
                                 'mask': rows['mask']}, margin + 1)
  return estimator(window['reward'], window['return_'], window['value'], window['done'],
                   window['mask'])[:, 0]
