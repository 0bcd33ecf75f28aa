"""Bytes a stored Atari step costs with stacked observations stored one frame per step.

Builds an RLTask on ALE/Pong-v5 with the Atari preprocessing and 4 stacked
84x84 frames, collects a few thousand steps with uniformly random actions in
epochs of --steps_per_epoch env steps (each epoch's end cuts the running
episodes, so the next trajectories start inside them and keep context
frames), and measures what the steps cost where the replay lives:
  host:   the task's epochs (EpochData: frames, context frames, scalars);
  slices: the SliceData that training gathers from (the frames, each row's
          frame indices, the scalars, the trajectory offsets), without and
          with the padding to its capacity bucket.
It prints what a step would cost with the (84, 84, 4) observations stored
whole, and extrapolates a 1M-step replay (DQN) from the measured rows and
context frames per step, padding included. The last line is the larger of
the host and unpadded slice figures: `bytes per stored step: N`.

Usage: python benchmarks/frame_memory.py [--steps 4096] [--n_envs 8]
         [--steps_per_epoch 1024] [--replay_steps 1000000]
"""
import argparse
import math
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


from rl.data import slices  # noqa: E402
from rl.envs.task import RLTask  # noqa: E402
from rl.envs.task import TaskNeeds  # noqa: E402

ENV = 'ALE/Pong-v5'
N_STACKED = 4
# The budget the replay of --replay_steps steps must fit in.
BUDGET_BYTES = 8 * 10**9


def _parse_args():
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument('--steps', type=int, default=4096, help='env steps collected')
  parser.add_argument('--n_envs', type=int, default=8, help='envs stepped together')
  parser.add_argument('--steps_per_epoch', type=int, default=1024,
                      help='env steps per epoch (n_interactions_per_epoch)')
  parser.add_argument('--replay_steps', type=int, default=1_000_000,
                      help='replay size the measurement is extrapolated to')
  args = parser.parse_args()
  if args.n_envs < 1 or args.steps_per_epoch % args.n_envs or args.steps_per_epoch < 1:
    parser.error('--steps_per_epoch must be a positive multiple of --n_envs')
  if args.steps < args.steps_per_epoch or args.steps % args.steps_per_epoch:
    parser.error('--steps must be a positive multiple of --steps_per_epoch')
  return args


def row_costs(data):
  """Bytes of one SliceData row, one stored frame and one trajectory entry."""
  size = len(data.row_end)
  per_row = sum(column.nbytes for column in data.rows.values()) // size
  per_row += data.row_end.nbytes // size
  per_frame = data.frames.nbytes // len(data.frames)
  per_traj = (data.traj_start.nbytes + data.traj_rows.nbytes) // len(data.traj_start)
  return per_row, per_frame, per_traj


def slice_bytes(per_row, per_frame, per_traj, n_rows, n_frames, n_traj, size):
  """(unpadded, padded) bytes of a SliceData of these counts at capacity `size`."""
  real = n_rows * per_row + n_frames * per_frame + n_traj * per_traj
  padded = size * (per_row + per_frame) + size // 2 * per_traj
  return real, padded


def old_capacity(n_rows):
  """The capacity buckets before FINE_ROWS: MIN_ROWS * 4^k all the way."""
  size = slices.MIN_ROWS
  while size < n_rows:
    size *= slices.GROWTH
  return size


def gb(n_bytes):
  return f'{n_bytes / 1e9:.2f} GB'


def main():
  args = _parse_args()
  task = RLTask(env=ENV, n_envs=args.n_envs, atari_preprocessing=True,
                num_stacked_frames=N_STACKED, seed=0)
  # What DQN stores per step: its Q-values as the acting distribution's inputs.
  task.build_storage(TaskNeeds(n_replay_epochs=args.steps // args.steps_per_epoch,
                               dist_inputs_size=int(task.action_space.n)))
  for epoch in range(1, args.steps // args.steps_per_epoch + 1):
    task.collect(task.random_policy, n_interactions=args.steps_per_epoch, epoch_id=epoch)
  epochs = [task.epochs[k] for k in sorted(task.epochs)]
  n_steps = sum(e.n_steps for e in epochs)
  n_rows = sum(len(e.rows['mask']) for e in epochs)
  n_context = sum(len(e.context) for e in epochs)
  n_traj = sum(e.n_trajectories for e in epochs)
  host = sum(e.nbytes for e in epochs)
  data = task.slice_data()
  task.close()
  frame_shape = data.frames.shape[1:]
  frame_bytes = data.frames.nbytes // len(data.frames)
  per_row, per_frame, per_traj = row_costs(data)
  real, padded = slice_bytes(per_row, per_frame, per_traj, n_rows, n_rows + n_context, n_traj,
                             len(data.row_end))
  stacked_obs = frame_bytes * N_STACKED
  scalars = sum(c.nbytes for name, c in epochs[0].rows.items() if name != 'observation') / len(
      epochs[0].rows['mask'])
  whole = n_rows * (stacked_obs + scalars) / n_steps

  print(f'{ENV}, {N_STACKED} stacked {frame_shape} frames of {frame_bytes} bytes; '
        f'{args.n_envs} envs, epochs of {args.steps_per_epoch} steps, random actions')
  print(f'collected {n_steps:,} steps in {n_traj} trajectories: {n_rows:,} rows '
        f'({n_rows / n_steps:.4f} per step), {n_context:,} context frames '
        f'({n_context / n_steps:.4f} per step)')
  print(f'host epochs: {host:,} bytes, {host / n_steps:,.0f} per step')
  print(f'slices: {real:,} bytes unpadded, {real / n_steps:,.0f} per step; padded to '
        f'{len(data.row_end):,} rows: {padded:,} bytes ({padded / n_steps:,.0f} per step)')
  print(f'stored whole, a stacked {frame_shape[:-1] + (frame_shape[-1] * N_STACKED,)} step '
        f'would cost {whole:,.0f} bytes ({stacked_obs} of observation)')
  print(f'the limit, 1.2 x 84 x 84 bytes plus the scalars: {1.2 * 84 * 84 + scalars:,.0f} '
        f'bytes per step ({scalars:.0f} of scalars per row)')

  # The replay of --replay_steps steps, with this collection's rows, context
  # frames and trajectories per step.
  steps = args.replay_steps
  rows = math.ceil(steps * n_rows / n_steps)
  frames = rows + math.ceil(steps * n_context / n_steps)
  trajs = math.ceil(steps * n_traj / n_steps)
  size = slices.capacity(frames)
  real_m, padded_m = slice_bytes(per_row, per_frame, per_traj, rows, frames, trajs, size)
  print(f'{steps:,}-step replay: {rows:,} rows + {frames - rows:,} context frames; host epochs '
        f'{gb(steps * host / n_steps)}, slices {gb(real_m)} unpadded, {gb(padded_m)} padded to '
        f'{size:,} rows ({"fits" if padded_m <= BUDGET_BYTES else "does NOT fit"} in '
        f'{gb(BUDGET_BYTES)}); stored whole it would be {gb(steps * whole)}')
  for fraction in (0.3, 0.6):
    part = int(frames * fraction)
    print(f'  a {fraction:.0%} full replay ({part:,} frames) pads to {slices.capacity(part):,} '
          f'rows ({old_capacity(part):,} with 4x buckets all the way)')
  print(f'bytes per stored step: {round(max(host, real) / n_steps)}')


if __name__ == '__main__':
  main()
