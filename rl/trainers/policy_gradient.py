"""PolicyGradientTrainer: REINFORCE with batch-normalised returns."""
import gin

from rl.trainers import losses
from rl.trainers.base import check_whole_episodes
from rl.trainers.policy import PolicyTrainer


@gin.configurable(denylist=['task', 'output_dir'])
class PolicyGradientTrainer(PolicyTrainer):
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
      n_eval_episodes, eval_temperatures, eval_every, only_eval,
      collect_per_epoch).
  """

  def __init__(self, task, model=None, optimizer=None, lr_schedule=None, batch_size=64,
               train_steps_per_epoch=500, n_trajectories_per_epoch=None,
               max_slice_length=1, output_dir=None, **kwargs):
    check_whole_episodes(self, task, dict(kwargs, n_trajectories_per_epoch=n_trajectories_per_epoch))
    super().__init__(
        task, policy_model=model, policy_optimizer=optimizer, policy_lr_schedule=lr_schedule,
        policy_batch_size=batch_size, policy_train_steps_per_epoch=train_steps_per_epoch,
        max_slice_length=max_slice_length, n_trajectories_per_epoch=n_trajectories_per_epoch,
        output_dir=output_dir, **kwargs)

  def policy_batches_stream(self):
    for batch in self.task.trajectory_batch_stream(
        self._policy_batch_size, epochs=[-1], max_slice_length=self._max_slice_length):
      yield batch.observation, batch.action, batch.return_, batch.mask

  def policy_loss(self, dist_inputs, actions, returns, mask):
    log_probs = self._policy_dist.log_prob(dist_inputs, actions)
    return losses.reinforce_loss(log_probs, returns, mask)

  @property
  def policy_metrics(self):
    dist = self._policy_dist

    def entropy(dist_inputs, actions, returns, mask):
      del actions, returns
      return losses.masked_mean(dist.entropy(dist_inputs), mask)

    def return_mean(dist_inputs, actions, returns, mask):
      del dist_inputs, actions
      return losses.masked_mean(returns, mask)

    return {'policy_loss': self.policy_loss, 'policy_entropy': entropy,
            'return_mean': return_mean}
