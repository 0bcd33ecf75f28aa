"""PolicyTrainer: an RLTrainer that trains a policy network with a supervised Trainer.

Subclasses define what a policy batch holds (`policy_batches_stream`) and the
loss on it (`policy_loss(dist_inputs, *batch_rest)`); this class builds the
policy model and its Trainer, acts with the model (temperature 1 with
normaliser updates when collecting, frozen statistics when evaluating), and
runs the policy training of an epoch in `policy_evals_per_epoch` chunks.
"""
import gin
import numpy as np

from rl import distributions
from rl import models
from rl.errors import ConfigError
from rl.supervised import lr_schedules
from rl.supervised import optimizers
from rl.supervised.trainer import Trainer
from rl.trainers.base import RLTrainer
from rl.trainers.base import check_divisible
from rl.trainers.base import prefix_trainer_metrics


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


def build_trainer(task, model, optimizer, lr_schedule, loss_fn, inputs, metrics, loss_name,
                  example_batch, n_model_inputs=1, seed_offset=0):
  """A supervised Trainer with the project's defaults (Adam, multifactor)."""
  return Trainer(
      model=model, optimizer=optimizer or optimizers.Adam,
      lr_schedule=(lr_schedule or lr_schedules.multifactor)(),
      loss_fn=loss_fn, inputs=inputs, metrics=metrics, seed=task.seed + seed_offset,
      example_batch=example_batch, n_model_inputs=n_model_inputs, loss_name=loss_name)


class PolicyTrainer(RLTrainer):
  """Base of the trainers with a separate policy network.

  Args:
    task: the RLTask.
    policy_model: policy model factory (gin: @Policy), called with the
      action distribution.
    policy_optimizer: optimizer factory (gin: @Adam, @RMSProp, @SGD).
    policy_lr_schedule: learning-rate schedule factory (gin: @multifactor or a
      scoped @policy/multifactor).
    policy_batch_size: slices per policy batch.
    policy_train_steps_per_epoch: policy gradient steps per epoch.
    policy_evals_per_epoch: the policy steps run in this many chunks, with
      metrics computed after each (only affects reporting).
    policy_eval_steps: batches the policy metrics are averaged over.
    n_eval_episodes: greedy evaluation episodes after each epoch (0: none).
    only_eval: collect and evaluate only.
    max_slice_length: steps per slice the policy trains on.
    output_dir: the run's folder (set by the runner).
    **kwargs: RLTrainer's arguments.
  """

  def __init__(self, task, policy_model=None, policy_optimizer=None, policy_lr_schedule=None,
               policy_batch_size=64, policy_train_steps_per_epoch=500,
               policy_evals_per_epoch=1, policy_eval_steps=1, n_eval_episodes=0,
               only_eval=False, max_slice_length=1, output_dir=None, **kwargs):
    super().__init__(task, n_eval_episodes=n_eval_episodes, only_eval=only_eval,
                     output_dir=output_dir, **kwargs)
    check_divisible(policy_train_steps_per_epoch, policy_evals_per_epoch,
                    'policy_train_steps_per_epoch', 'policy_evals_per_epoch')
    self._policy_batch_size = policy_batch_size
    self._policy_train_steps = policy_train_steps_per_epoch
    self._policy_evals = policy_evals_per_epoch
    self._policy_eval_steps = policy_eval_steps
    self._max_slice_length = max_slice_length
    self._policy_dist = policy_distribution(task, type(self).__name__)
    self._policy_model = (policy_model or models.Policy)(policy_distribution=self._policy_dist)
    self._policy_trainer = build_trainer(
        task, self._policy_model, policy_optimizer, policy_lr_schedule, self.policy_loss,
        self.policy_batches_stream, self.policy_metrics, 'policy_loss',
        (example_observation(task),))
    self._trainers['policy'] = self._policy_trainer
    self.init_collect_model_state(self._policy_trainer.model_state)
    self._set_acting_model(self._policy_model, self._policy_dist,
                           lambda: self._policy_trainer.variables)

  @property
  def policy_metrics(self):
    """Metric name -> fn(dist_inputs, *batch_rest); extended by subclasses."""
    return {'policy_loss': self.policy_loss}

  def policy_loss(self, dist_inputs, *batch):
    raise NotImplementedError

  def policy_batches_stream(self):
    raise NotImplementedError

  def _train_policy(self):
    """The policy part of an epoch, in `policy_evals_per_epoch` chunks."""
    self.use_acting_statistics(self._policy_trainer)
    metrics = {}
    for _ in range(self._policy_evals):
      metrics = self._policy_trainer.train_epoch(
          self._policy_train_steps // self._policy_evals, self._policy_eval_steps)
    return prefix_trainer_metrics(metrics, 'policy_')

  def train_epoch(self):
    return self._train_policy()
