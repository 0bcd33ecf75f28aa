"""REINFORCE (PolicyGradientTrainer), and PolicyTrainer: a trainer of one policy network.

PolicyTrainer trains a policy on slices of the newest epoch's trajectories
with a loss its subclass gives (`policy_batch`, `policy_loss`): the place to
start a new policy-gradient variant. PolicyGradientTrainer is REINFORCE: the
log-likelihood of the taken actions weighted by their normalised returns.
"""
import gin

from rl.algorithms.batches import ReturnsBatch
from rl.algorithms.policy_network import PolicyNetwork
from rl.learner.acting import Acting
from rl.learner.checks import check_backend
from rl.learner.checks import check_whole_episodes
from rl.learner.trainer import RLTrainer
from rl.ops import losses


class PolicyTrainer(RLTrainer):
  """A trainer of one policy network on the newest epoch's trajectories.

  Subclasses give the batch (`policy_batch`) and the loss (`policy_loss`).

  Args:
    task: the RLTask.
    policy_model: policy model factory (gin: @Policy), called with the
      action distribution; None: @Policy.
    policy_optimizer: optimizer factory (gin: @Adam, @RMSProp, @SGD); None:
      @Adam.
    policy_lr_schedule: learning-rate schedule factory (gin: @multifactor);
      None: @multifactor.
    policy_batch_size: slices per policy batch.
    policy_train_steps_per_epoch: policy gradient steps per epoch.
    policy_evals_per_epoch: the steps run in this many chunks, with the
      metrics after each; the last chunk's are reported.
    policy_eval_steps: 0: the metrics are those of the last chunk's training
      batches, computed with the loss; N > 0: they are evaluated after each
      chunk on N fresh batches (the reference's way).
    max_slice_length: steps per slice the policy trains on.
    **kwargs: RLTrainer's arguments (n_trajectories_per_epoch,
      n_interactions_per_epoch, n_eval_episodes, eval_temperatures,
      eval_every, only_eval, output_dir, collect_per_epoch).
  """

  def __init__(self, task, policy_model=None, policy_optimizer=None, policy_lr_schedule=None,
               policy_batch_size=64, policy_train_steps_per_epoch=500,
               policy_evals_per_epoch=1, policy_eval_steps=0, max_slice_length=1, **kwargs):
    super().__init__(task, **kwargs)
    self.policy = PolicyNetwork(task, type(self).__name__, policy_model, policy_optimizer,
                                policy_lr_schedule, policy_batch_size,
                                policy_train_steps_per_epoch, policy_evals_per_epoch,
                                policy_eval_steps, max_slice_length)
    self.build()

  def build_networks(self):
    network = self.policy.build(self.policy_loss, self.policy_batch)
    return {'policy': network}, Acting('policy', self.policy.dist)

  def policy_batch(self, data, fields, key, carry, variables):
    """One policy batch from its slices' `fields` (pure)."""
    raise NotImplementedError(f'{type(self).__name__} gives no policy_batch')

  def policy_loss(self, dist_inputs, batch):
    """(loss, metrics) of the policy's dist_inputs on a policy batch (pure)."""
    raise NotImplementedError(f'{type(self).__name__} gives no policy_loss')

  def epoch_data(self, epoch):
    del epoch
    return {'policy': self.task.slice_data([-1])}

  def update(self, state, data):
    state, result = self.policy.train(self.fit, state, data['policy'])
    return state, {'policy': result}, {}


@gin.configurable(denylist=['task', 'output_dir'])
class PolicyGradientTrainer(PolicyTrainer):
  """REINFORCE: trains the policy on -log pi(a|s) weighted by normalised returns.

  Args:
    task: the RLTask.
    model: policy model factory (gin: @Policy), called with the action
      distribution; None: @Policy.
    optimizer: optimizer factory (gin: @Adam, @RMSProp, @SGD); None: @Adam.
    lr_schedule: learning-rate schedule factory (gin: @multifactor); None:
      @multifactor.
    batch_size: slices per training batch.
    train_steps_per_epoch: gradient steps per epoch; each draws a fresh batch
      from the newest epoch's trajectories (1 keeps REINFORCE on-policy).
    n_trajectories_per_epoch: complete trajectories collected per epoch
      (the reference's name: collect_per_epoch).
    max_slice_length: slice length in steps; None trains on whole trajectories.
    **kwargs: RLTrainer's arguments (n_interactions_per_epoch,
      n_eval_episodes, eval_temperatures, eval_every, only_eval, output_dir,
      collect_per_epoch).
  """

  def __init__(self, task, model=None, optimizer=None, lr_schedule=None, batch_size=64,
               train_steps_per_epoch=500, n_trajectories_per_epoch=None,
               max_slice_length=1, **kwargs):
    # Refused before the whole-episode check, whose fix this backend lacks.
    check_backend(self, task)
    check_whole_episodes(self, task, dict(kwargs, n_trajectories_per_epoch=n_trajectories_per_epoch))
    super().__init__(
        task, policy_model=model, policy_optimizer=optimizer, policy_lr_schedule=lr_schedule,
        policy_batch_size=batch_size, policy_train_steps_per_epoch=train_steps_per_epoch,
        max_slice_length=max_slice_length, n_trajectories_per_epoch=n_trajectories_per_epoch,
        **kwargs)

  def epoch_data(self, epoch):
    del epoch
    return {'policy': self.task.slice_data(
        [-1], whole_trajectories=self.policy.max_slice_length is None)}

  def policy_batch(self, data, fields, key, carry, variables):
    del data, key, carry, variables
    return ReturnsBatch(fields['observation'], fields['action'], fields['return_'],
                        fields['mask'])

  def policy_loss(self, dist_inputs, batch):
    dist = self.policy.dist
    log_probs = dist.log_prob(dist_inputs, batch.action)
    loss = losses.reinforce_loss(log_probs, batch.return_, batch.mask)
    return loss, {'policy_loss': loss,
                  'policy_entropy': losses.masked_mean(dist.entropy(dist_inputs), batch.mask),
                  'return_mean': losses.masked_mean(batch.return_, batch.mask)}
