"""How an algorithm makes its networks: a Trainer with the project's defaults."""
import numpy as np

from rl.errors import ConfigError
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


def build_network(task, model, optimizer, lr_schedule, loss_name, example_inputs,
                  seed_offset=0):
  """A network's Trainer with the project's defaults (Adam, multifactor).

  Its initial state is made later, with the algorithm's other networks
  (rl.learner.learner).
  """
  return Trainer(
      model=model, optimizer=optimizer or optimizers.Adam,
      lr_schedule=(lr_schedule or lr_schedules.multifactor)(),
      example_inputs=example_inputs, seed=task.seed + seed_offset, loss_name=loss_name,
      initialize=False)
