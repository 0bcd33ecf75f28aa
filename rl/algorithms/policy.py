"""PolicyTrainer: an RLTrainer that trains a policy network with a supervised Trainer.

Subclasses define what a policy batch holds (`policy_batch`, drawn on the
device from the epoch's slices) and the loss on it (`policy_loss(dist_inputs,
batch) -> (loss, metrics)`); this class builds the policy model and its
Trainer, acts with the model (temperature 1 with normaliser updates when
collecting, frozen statistics when evaluating), and trains the policy once
per epoch in one fused call.
"""
import numpy as np

from rl.ops import distributions
from rl.nets import heads
from rl.data import slices
from rl.errors import ConfigError
from rl.optim import lr_schedules
from rl.optim import optimizers
from rl.learner.network_trainer import DeviceBatches
from rl.learner.network_trainer import Trainer
from rl.learner.base import RLTrainer
from rl.learner.base import check_divisible


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


def build_trainer(task, model, optimizer, lr_schedule, loss_fn, draw_fn, batch_fn, loss_name,
                  example_inputs, inputs_fn=None, seed_offset=0, prepare_fn=None,
                  after_step=None, after_chunk=None):
  """A supervised Trainer with the project's defaults (Adam, multifactor).

  Its batches are slices of the task's trajectories: the data handed to
  `draw_fn(data, key)` (which returns an rl.data.slices.Drawn) and to
  `batch_fn(data, fields, key, carry, variables)` is a pair (SliceData,
  DrawTable), and the fields are the drawn slices' rows.
  Its initial state is made later, with the other networks' (RLTrainer's
  initialize_networks).
  """
  return Trainer(
      model=model, optimizer=optimizer or optimizers.Adam,
      lr_schedule=(lr_schedule or lr_schedules.multifactor)(),
      loss_fn=loss_fn, example_inputs=example_inputs,
      batches=DeviceBatches(draw_fn, take_slices, batch_fn),
      inputs_fn=inputs_fn or observation_input, seed=task.seed + seed_offset,
      loss_name=loss_name, prepare_fn=prepare_fn, after_step=after_step,
      after_chunk=after_chunk, initialize=False)  # RLTrainer.initialize_networks


def take_slices(data, drawn):
  """The rows of the slices `drawn` from `data`, a pair (SliceData, DrawTable)."""
  return slices.take(data[0], drawn)


def observation_input(batch):
  """The model inputs of a batch whose network sees only observations."""
  return (batch.observation,)


class PolicyTrainer(RLTrainer):
  """Base of the trainers with a separate policy network.

  Subclasses define the policy batch (`policy_batch`, drawn on the device)
  and the loss on it (`policy_loss`, returning its metrics too).

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
      the metrics evaluated after each; the last chunk's are reported.
    policy_eval_steps: 0 (default): the metrics are those of the training
      batches of the last chunk, computed with the loss; N > 0: they are
      evaluated after each chunk on N fresh batches (the reference's way,
      which compiles a second copy of the loss).
    n_eval_episodes: greedy evaluation episodes after each epoch (0: none).
    only_eval: collect and evaluate only.
    max_slice_length: steps per slice the policy trains on.
    output_dir: the run's folder (set by the runner).
    **kwargs: RLTrainer's arguments.
  """

  def __init__(self, task, policy_model=None, policy_optimizer=None, policy_lr_schedule=None,
               policy_batch_size=64, policy_train_steps_per_epoch=500,
               policy_evals_per_epoch=1, policy_eval_steps=0, n_eval_episodes=0,
               only_eval=False, max_slice_length=1, output_dir=None, **kwargs):
    super().__init__(task, n_eval_episodes=n_eval_episodes, only_eval=only_eval,
                     output_dir=output_dir, **kwargs)
    check_divisible(policy_train_steps_per_epoch, policy_evals_per_epoch,
                    'policy_train_steps_per_epoch', 'policy_evals_per_epoch')
    self._policy_model_factory = policy_model or heads.Policy
    self._policy_optimizer = policy_optimizer
    self._policy_lr_schedule = policy_lr_schedule
    self._policy_batch_size = policy_batch_size
    self._policy_train_steps = policy_train_steps_per_epoch
    self._policy_evals = policy_evals_per_epoch
    self._policy_eval_steps = policy_eval_steps
    self._max_slice_length = max_slice_length
    self._policy_dist = policy_distribution(task, type(self).__name__)

  def build_networks(self):
    self._policy_model = self._policy_model_factory(policy_distribution=self._policy_dist)
    self._policy_trainer = build_trainer(
        self.task, self._policy_model, self._policy_optimizer, self._policy_lr_schedule,
        self.policy_loss, self.draw_policy_slices, self.policy_batch, 'policy_loss',
        (example_observation(self.task),), prepare_fn=self.prepare_policy_data)
    self._trainers['policy'] = self._policy_trainer
    self.set_acting_model(self._policy_trainer, self._policy_dist)

  def prepare_policy_data(self, data, key, carry):
    """(the SliceData with `policy_rows`' per-row work, its slices.DrawTable), per chunk (pure).

    The policy batches of the chunk are drawn from these (`draw_policy_slices`).
    """
    data = self.policy_rows(data, key, carry)
    return data, slices.draw_table(data, self._max_slice_length)

  def policy_rows(self, data, key, carry):
    """Per-row work on the epoch's SliceData before the policy steps (pure; none here)."""
    del key, carry
    return data

  def draw_policy_slices(self, data, key):
    """Which rows a policy batch of [policy_batch_size, max_slice_length] holds (pure)."""
    data, table = data
    return slices.draw(data, key, self._policy_batch_size, self._max_slice_length,
                       table=table)

  def policy_batch(self, data, fields, key, carry, variables):
    """One policy batch from its slices' `fields` (pure; see `build_trainer`)."""
    raise NotImplementedError

  def policy_loss(self, dist_inputs, batch):
    """(loss, metrics) of the policy's dist_inputs on a policy batch (pure)."""
    raise NotImplementedError

  def policy_data(self):
    """The SliceData the policy trains on this epoch (the newest epoch by default)."""
    return self.task.slice_data([-1])

  def policy_carry(self, state):
    """What the policy batches need besides the data (e.g. the value network), from `state`."""
    del state
    return None

  def train_policy(self, state, data):
    """The policy part of an epoch (pure): (state, EpochResult)."""
    state = self.with_acting_statistics(state, 'policy')
    state, result, _ = self.fit(state, 'policy', data, self._policy_train_steps,
                                self._policy_evals, self._policy_eval_steps,
                                carry=self.policy_carry(state))
    return state, result

  def epoch_data(self):
    return {'policy': self.policy_data()}

  def rollout_data(self, newest, replay, epoch):
    del replay, epoch
    return {'policy': newest}

  def update(self, state, data):
    state, result = self.train_policy(state, data['policy'])
    return state, {'policy': result}, {}
