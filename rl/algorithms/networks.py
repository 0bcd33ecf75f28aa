"""How an algorithm makes its networks: a Trainer with the project's defaults, trained on
slices of the task's trajectories."""
import numpy as np

from rl.data import slices
from rl.errors import ConfigError
from rl.learner.fused_epoch import DeviceBatches
from rl.learner.network_trainer import Trainer
from rl.ops import distributions
from rl.optim import lr_schedules
from rl.optim import optimizers


def policy_distribution(task, trainer_name):
  """The action distribution of `task`, or a one-line error naming the trainer."""
  try:
    return distributions.create_distribution(task.action_space)
  except TypeError:
    raise ConfigError(
        f'{trainer_name} cannot act in {task.env_name}: its action space '
        f'{task.action_space} is not supported (Discrete, MultiDiscrete with equal '
        'sizes, or Box). Pick another env.') from None


def example_observation(task):
  """A [1, 1, *obs_shape] batch, only for the shapes of model initialisation."""
  space = task.observation_space
  return np.zeros((1, 1) + space.shape, space.dtype)


def take_slices(data, drawn):
  """The rows of the slices `drawn` from `data`, a pair (SliceData, DrawTable)."""
  return slices.take(data[0], drawn)


def observation_input(batch):
  """The model inputs of a batch whose network sees only observations."""
  return (batch.observation,)


def build_network(task, model, optimizer, lr_schedule, loss_fn, draw_fn, batch_fn, loss_name,
                  example_inputs, inputs_fn=None, seed_offset=0, prepare_fn=None,
                  after_step=None, after_chunk=None):
  """A network's Trainer with the project's defaults (Adam, multifactor).

  Its batches are slices of the task's trajectories: the data handed to
  `draw_fn(data, key)` (which returns an rl.data.slices.Drawn) and to
  `batch_fn(data, fields, key, carry, variables)` is a pair (SliceData,
  DrawTable), and the fields are the drawn slices' rows. Its initial state is
  made later, with the algorithm's other networks (rl.learner.learner).
  """
  return Trainer(
      model=model, optimizer=optimizer or optimizers.Adam,
      lr_schedule=(lr_schedule or lr_schedules.multifactor)(),
      loss_fn=loss_fn, example_inputs=example_inputs,
      batches=DeviceBatches(draw_fn, take_slices, batch_fn),
      inputs_fn=inputs_fn or observation_input, seed=task.seed + seed_offset,
      loss_name=loss_name, prepare_fn=prepare_fn, after_step=after_step,
      after_chunk=after_chunk, initialize=False)
