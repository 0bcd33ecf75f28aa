"""An off-policy epoch's replay work: the device ring of epochs against a whole copy per epoch.

A gymnasium task keeps its stored epochs on the host. Each training epoch of
SAC or TD3 reads all of them on the device. Side by side, on a replay of
HalfCheetah-v5-shaped epochs (1,000 transitions each, 17 observation and 6
action dims, SAC's 12 policy outputs):
  ring  `Trajectories.replay()`: the new epoch written into its slot of the
        device ring (rl/data/replay_ring.py);
  copy  `Trajectories.slice_data()`: every stored epoch concatenated, padded
        and put on the device, the way every other trainer reads its epochs.
Prints the milliseconds per epoch of each (a new epoch stored, then the
replay read, median of --epochs), their ratio, and the bytes per transition
of the ring on the device and of the epochs stored on the host.

  python benchmarks/replay_ring.py [--stored 1000] [--epochs 10]
"""
import argparse
import os
import sys
import time

import gymnasium as gym
import jax
import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
# pylint: disable=wrong-import-position
from rl.data.trajectories import Trajectories  # noqa: E402

OBS, ACT, STEPS = 17, 6, 1000


def trajectory(rng):
  """One stored 1,000-step segment (its final row included) of HalfCheetah's shapes."""
  n = STEPS + 1
  return {'observation': rng.normal(size=(n, OBS)).astype(np.float32),
          'action': rng.normal(size=(n, ACT)).astype(np.float32),
          'reward': rng.normal(size=n).astype(np.float32),
          'done': np.zeros(n, np.float32),
          'mask': np.r_[np.ones(STEPS), 0].astype(np.float32),
          'dist_inputs': rng.normal(size=(n, 2 * ACT)).astype(np.float32),
          'return_': rng.normal(size=n).astype(np.float32)}


def storage(n_epochs):
  space = gym.spaces.Box(-np.inf, np.inf, (OBS,), np.float32)
  actions = gym.spaces.Box(-1, 1, (ACT,), np.float32)
  return Trajectories(1, 0.99, space, space, actions, 1, 1000, n_epochs, 2 * ACT,
                      reserved_rows=n_epochs * STEPS)


def per_epoch_ms(read, n_stored, n_epochs):
  """Median ms of storing one more epoch and reading the replay with `read(storage)`."""
  rng = np.random.default_rng(0)
  store = storage(n_stored)
  segment = trajectory(rng)
  for epoch in range(1, n_stored + 1):
    store.store(epoch, [segment])
  jax.block_until_ready(read(store))  # the ring is made here, and the copy compiles nothing
  times = []
  for epoch in range(n_stored + 1, n_stored + 1 + n_epochs):
    start = time.perf_counter()
    store.store(epoch, [segment])
    jax.block_until_ready(read(store))
    times.append(time.perf_counter() - start)
  return 1000 * float(np.median(times)), store


def main():
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument('--stored', type=int, default=1000, help='epochs in the replay')
  parser.add_argument('--epochs', type=int, default=10, help='epochs timed')
  args = parser.parse_args()
  ring_ms, ring_store = per_epoch_ms(lambda s: s.replay(), args.stored, args.epochs)
  copy_ms, _ = per_epoch_ms(lambda s: s.slice_data(), args.stored, args.epochs)
  transitions = args.stored * STEPS
  device = sum(x.nbytes for x in jax.tree_util.tree_leaves(ring_store.replay()))
  host = sum(e.nbytes for e in ring_store.epochs.values())
  print(f'{transitions:,} transitions: ring {ring_ms:.1f} ms per epoch, copy {copy_ms:.1f} ms')
  print(f'device ring {device / transitions:.0f} bytes per transition, '
        f'host epochs {host / transitions:.0f}')
  print(f'ring/copy: {ring_ms / copy_ms:.3f}')


if __name__ == '__main__':
  main()
