"""Tasks for tests that drive them without a trainer, and the slices sampled from them."""
import jax
import numpy as np

from rl import keys
from rl.data import slices
from rl.data.trajectories import Batch
from rl.envs.task import RLTask
from rl.envs.task import TaskNeeds

_sample = jax.jit(slices.sample, static_argnums=(2, 3, 4, 5, 6))


def built_task(n_replay_epochs=1, dist_inputs_size=1, **kwargs):
  """RLTask(**kwargs) with its storage built, as a trainer with these needs builds it."""
  task = RLTask(**kwargs)
  task.build_storage(TaskNeeds(n_replay_epochs=n_replay_epochs,
                               dist_inputs_size=dist_inputs_size))
  return task


def sample_batch(task, batch_size, epochs=None, max_slice_length=None, min_slice_length=None,
                 margin=0, sample_trajectories_uniformly=False, seed=0):
  """One Batch of `batch_size` random slices of the task's epochs, as numpy arrays.

  The sampling the trainers do inside their jitted epochs (rl.data.slices.sample),
  keyed by `seed`. Every slice is padded to exactly max(L, min_slice_length)
  rows, L = max_slice_length (None: whole trajectories, padded to the next
  power of two of the longest); padding has mask 0.
  """
  data = task.slice_data(epochs, whole_trajectories=max_slice_length is None)
  fields = _sample(data, keys.seed_key(seed), batch_size, max_slice_length,
                   min_slice_length, margin, sample_trajectories_uniformly)
  return Batch(**{f: np.asarray(v) for f, v in fields.items()})
