"""Minibatches of transitions for the off-policy trainers' step tests (DDPG, SAC)."""
import numpy as np


def pendulum_transitions(seed=0, batch=8):
  """Random 2-row slices of Pendulum-shaped transitions; the first rows of two of them end
  their episode (no bootstrap)."""
  rng = np.random.default_rng(seed)
  done = np.zeros((batch, 2), np.float32)
  done[:2, 0] = 1.0
  return {'observation': rng.normal(size=(batch, 2, 3)).astype(np.float32),
          'action': rng.uniform(-2, 2, size=(batch, 2, 1)).astype(np.float32),
          'reward': rng.normal(size=(batch, 2)).astype(np.float32),
          'return_': np.zeros((batch, 2), np.float32),
          'done': done, 'mask': np.ones((batch, 2), np.float32)}
