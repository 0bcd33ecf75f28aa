"""PolicyNetwork: a policy network trained on slices of the task's trajectories.

What the policy-based trainers (REINFORCE, the actor-critics) share: the
policy model and its Trainer, how its batches are drawn, and its part of an
epoch. The algorithm that owns it supplies the batch and the loss.
"""
from rl.algorithms import networks
from rl.data import slices
from rl.learner.checks import check_divisible
from rl.learner.state import with_acting_statistics
from rl.nets import heads


class PolicyNetwork:
  """The policy network of a trainer and its training settings (the trainer's policy_* args).

  Args:
    task: the RLTask.
    trainer_name: named in error messages.
    model: policy model factory (gin: @Policy), called with the distribution.
    optimizer: optimizer factory (gin: @Adam, @RMSProp, @SGD).
    lr_schedule: learning-rate schedule factory (gin: @multifactor).
    batch_size: slices per policy batch.
    train_steps: policy gradient steps per epoch.
    evals: the steps run in this many chunks (metrics after each).
    eval_steps: 0: the metrics are those of the last chunk's training
      batches; N > 0: of N fresh batches after each chunk.
    max_slice_length: steps per slice.
  """

  def __init__(self, task, trainer_name, model, optimizer, lr_schedule, batch_size,
               train_steps, evals, eval_steps, max_slice_length):
    check_divisible(train_steps, evals, 'policy_train_steps_per_epoch',
                    'policy_evals_per_epoch')
    self.task = task
    self.dist = networks.policy_distribution(task, trainer_name)
    self._model_factory = model or heads.Policy
    self._optimizer = optimizer
    self._lr_schedule = lr_schedule
    self.batch_size = batch_size
    self.train_steps = train_steps
    self.evals = evals
    self.eval_steps = eval_steps
    self.max_slice_length = max_slice_length
    self.model = self.trainer = None
    self._rows_fn = None

  def build(self, loss_fn, batch_fn, rows_fn=None, draw_fn=None):
    """Makes the model and its Trainer.

    Args:
      loss_fn: (dist_inputs, batch) -> (loss, metrics).
      batch_fn: (data, fields, key, carry, variables) -> the batch.
      rows_fn: (SliceData, key, carry) -> SliceData with per-row work done
        once per chunk (e.g. every row's advantage); None: none.
      draw_fn: (data, key) -> the drawn slices; default `draw`.
    """
    self._rows_fn = rows_fn
    self.model = self._model_factory(policy_distribution=self.dist)
    self.trainer = networks.build_network(
        self.task, self.model, self._optimizer, self._lr_schedule, loss_fn,
        draw_fn or self.draw, batch_fn, 'policy_loss',
        (networks.example_observation(self.task),), prepare_fn=self._prepare)
    return self.trainer

  def _prepare(self, data, key, carry):
    """(the SliceData with the per-row work, its slices.DrawTable), once per chunk (pure)."""
    if self._rows_fn is not None:
      data = self._rows_fn(data, key, carry)
    return data, slices.draw_table(data, self.max_slice_length)

  def draw(self, data, key):
    """Which rows a batch of [batch_size, max_slice_length] holds (pure)."""
    data, table = data
    return slices.draw(data, key, self.batch_size, self.max_slice_length, table=table)

  def train(self, fit, state, data, carry=None):
    """The policy part of an epoch (pure): (state, EpochResult), through the owner's `fit`."""
    state = with_acting_statistics(state, 'policy')
    state, result, _ = fit(state, 'policy', data, self.train_steps, self.evals,
                           self.eval_steps, carry=carry)
    return state, result
