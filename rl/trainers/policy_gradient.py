"""PolicyGradientTrainer: REINFORCE with batch-normalised returns."""
import gin
import numpy as np

from rl import distributions
from rl import models
from rl.errors import ConfigError
from rl.supervised import lr_schedules
from rl.supervised import optimizers
from rl.supervised.trainer import Trainer
from rl.trainers import losses
from rl.trainers.base import RLTrainer


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


@gin.configurable(denylist=['task', 'output_dir'])
class PolicyGradientTrainer(RLTrainer):
  """REINFORCE: trains the policy on -log pi(a|s) weighted by normalised returns.

  Args:
    task: the RLTask.
    model: policy model factory (gin: @Policy); called with the distribution.
    optimizer: optimizer factory (gin: @Adam, @RMSProp, @SGD).
    lr_schedule: learning-rate schedule factory (gin: @multifactor).
    batch_size: slices per training batch.
    train_steps_per_epoch: gradient steps per epoch; each draws a fresh batch
      from the newest epoch's trajectories (1 keeps REINFORCE on-policy).
    n_trajectories_per_epoch: complete trajectories collected per epoch
      (old alias: collect_per_epoch).
    max_slice_length: slice length in steps; None trains on whole trajectories.
    output_dir: the run's folder (set by the runner).
    **kwargs: RLTrainer's arguments (n_interactions_per_epoch,
      n_eval_episodes, eval_temperatures, only_eval, collect_per_epoch).
  """

  def __init__(self, task, model=None, optimizer=None, lr_schedule=None, batch_size=64,
               train_steps_per_epoch=500, n_trajectories_per_epoch=None,
               max_slice_length=1, output_dir=None, **kwargs):
    super().__init__(task, n_trajectories_per_epoch=n_trajectories_per_epoch,
                     output_dir=output_dir, **kwargs)
    self._batch_size = batch_size
    self._train_steps = train_steps_per_epoch
    self._max_slice_length = max_slice_length
    self._dist = policy_distribution(task, type(self).__name__)
    dist = self._dist
    model = (model or models.Policy)(policy_distribution=dist)

    def loss(dist_inputs, actions, returns, mask):
      return losses.reinforce_loss(dist.log_prob(dist_inputs, actions), returns, mask)

    def entropy(dist_inputs, actions, returns, mask):
      del actions, returns
      return losses.masked_mean(dist.entropy(dist_inputs), mask)

    def return_mean(dist_inputs, actions, returns, mask):
      del dist_inputs, actions
      return losses.masked_mean(returns, mask)

    self._trainer = Trainer(
        model=model, optimizer=optimizer or optimizers.Adam,
        lr_schedule=(lr_schedule or lr_schedules.multifactor)(),
        loss_fn=loss, inputs=self._batches, seed=task.seed,
        metrics={'policy_loss': loss, 'policy_entropy': entropy, 'return_mean': return_mean},
        example_batch=(example_observation(task),), loss_name='policy_loss')
    self._trainers['policy'] = self._trainer
    self.init_collect_model_state(self._trainer.model_state)
    self._set_acting_model(model, dist, lambda: self._trainer.variables)

  def _batches(self):
    for batch in self.task.trajectory_batch_stream(
        self._batch_size, epochs=[-1], max_slice_length=self._max_slice_length):
      yield batch.observation, batch.action, batch.return_, batch.mask

  def train_epoch(self):
    # The acting model's normaliser statistics are the ones to train with.
    self._trainer.model_state = self._collect_model_state
    return self._trainer.train_epoch(self._train_steps, n_eval_steps=1)
