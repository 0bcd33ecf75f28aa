"""Stacked observations stored one frame per step and rebuilt when rows are gathered.

With RLTask.num_stacked_frames = n > 1 the env's observation of step t is
the frames of steps t - n + 1 .. t concatenated on their last axis (at an
episode's start its first frame fills the stack; see rl.envs.wrappers.StackFrames).
Stored as such, every frame would be stored n times. The task stores instead

  * each row's newest frame (the last C channels of its observation, C those
    of one frame), final-observation rows included, in the rows'
    'observation' column;
  * per trajectory, its *context*: the frames before its first row's newest
    one that its first n - 1 rows see. A trajectory that starts an episode
    needs none (the stack repeats its first frame); one that starts inside an
    episode (an epoch's end or max_steps cut the episode there) keeps the
    real ones, because the trajectory before it may leave the buffer first.
    Equal frames at the old end of the stack are kept once: the rebuilt stack
    repeats the oldest kept frame, as the env repeats the first one.

So a step costs one frame, and a trajectory at most n - 1 more. Rows are
turned back into observations with `frame_indices` (the n frames of each
row, oldest first, computed once per padded buffer) and `stack` (one gather
of n frames per row), inside the jitted sampling (rl.data.slices).
"""
import jax.numpy as jnp
import numpy as np


def newest(obs, channels):
  """The newest frame of stacked observations [..., n * C]: the last `channels` channels."""
  return obs[..., obs.shape[-1] - channels:]


def context(older, first, n_stacked):
  """The context frames [c, *frame] a trajectory keeps, 0 <= c < n_stacked.

  Args:
    older: the first row's observation without its newest frame [..., (n - 1) * C].
    first: the first row's newest frame [..., C].
    n_stacked: frames per observation (n).
  """
  frames = np.stack(np.split(older, n_stacked - 1, axis=-1) + [first])
  same = 1
  while same < n_stacked and np.array_equal(frames[same], frames[0]):
    same += 1
  # The oldest `same` frames are equal; the rebuilt stack repeats the oldest
  # kept frame into the positions before it, so keeping the last of them is enough.
  return frames[same - 1:n_stacked - 1]


def frame_indices(traj_start, traj_rows, traj_context, n_rows, n_stacked):
  """Each row's frames, oldest first: [n_rows, n_stacked] int32 indices.

  The indices point into the frames of all rows (row r's newest frame is
  frame r) followed by the context frames of every trajectory, in
  trajectory order; trajectory i has traj_context[i] of them. Rows that
  belong to no trajectory keep index 0.
  """
  traj_start = np.asarray(traj_start, np.int64)
  traj_rows = np.asarray(traj_rows, np.int64)
  traj_context = np.asarray(traj_context, np.int64)
  first = np.repeat(traj_start, traj_rows)
  offsets = np.cumsum(traj_rows) - traj_rows
  position = np.arange(int(traj_rows.sum())) - np.repeat(offsets, traj_rows)
  # A row's frames relative to its trajectory's first row (0) and its
  # context (negative); older than the oldest context frame repeats that one.
  slot = position[:, None] + np.arange(1 - n_stacked, 1)[None, :]
  slot = np.maximum(slot, -np.repeat(traj_context, traj_rows)[:, None])
  context_end = np.repeat(n_rows + np.cumsum(traj_context), traj_rows)
  index = np.where(slot >= 0, first[:, None] + slot, context_end[:, None] + slot)
  out = np.zeros((n_rows, n_stacked), np.int32)
  out[first + position] = index
  return out


def stack(frames, index):
  """Observations [..., *frame[:-1], n * C] from frames [F, *frame] and indices [..., n] (pure).

  Channel f * C + c of an observation is channel c of its f-th oldest frame,
  as the env stacks them.
  """
  taken = frames[index]
  taken = jnp.moveaxis(taken, index.ndim - 1, -2)
  return taken.reshape(taken.shape[:-2] + (-1,))
