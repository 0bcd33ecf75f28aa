"""PolicyGradientTrainer: REINFORCE with batch-normalised returns."""
import gin

from rl.ops import losses
from rl.algorithms.batches import ReturnsBatch
from rl.learner.base import check_backend
from rl.learner.base import check_whole_episodes
from rl.algorithms.policy import PolicyTrainer


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
    # Refused before the whole-episode check, whose fix this backend lacks.
    check_backend(self, task)
    check_whole_episodes(self, task, dict(kwargs, n_trajectories_per_epoch=n_trajectories_per_epoch))
    super().__init__(
        task, policy_model=model, policy_optimizer=optimizer, policy_lr_schedule=lr_schedule,
        policy_batch_size=batch_size, policy_train_steps_per_epoch=train_steps_per_epoch,
        max_slice_length=max_slice_length, n_trajectories_per_epoch=n_trajectories_per_epoch,
        output_dir=output_dir, **kwargs)

  def policy_data(self):
    return self.task.slice_data([-1], whole_trajectories=self._max_slice_length is None)

  def policy_batch(self, data, fields, key, carry, variables):
    del data, key, carry, variables
    return ReturnsBatch(fields['observation'], fields['action'], fields['return_'],
                        fields['mask'])

  def policy_loss(self, dist_inputs, batch):
    dist = self._policy_dist
    log_probs = dist.log_prob(dist_inputs, batch.action)
    loss = losses.reinforce_loss(log_probs, batch.return_, batch.mask)
    return loss, {'policy_loss': loss,
                  'policy_entropy': losses.masked_mean(dist.entropy(dist_inputs), batch.mask),
                  'return_mean': losses.masked_mean(batch.return_, batch.mask)}
