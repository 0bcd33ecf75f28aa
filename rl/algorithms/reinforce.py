"""REINFORCE (PolicyGradientTrainer), and PolicyTrainer: a trainer of one policy network.

PolicyTrainer trains a policy on slices of the newest epoch's trajectories
with a loss its subclass gives (`policy_batch`, `policy_loss`): the place to
start a new policy-gradient variant. PolicyGradientTrainer is REINFORCE: the
log-likelihood of the taken actions weighted by their normalised returns.
"""

from rl.algorithms import networks
from rl.algorithms.batches import ReturnsBatch
from rl.configurables import configurable
from rl.data import slices
from rl.learner.acting import Acting
from rl.learner.checks import check_backend
from rl.learner.checks import check_divisible
from rl.learner.checks import check_whole_episodes
from rl.learner.fused_epoch import fused_epoch
from rl.learner.fused_epoch import one_network_step
from rl.learner.trainer import RLTrainer
from rl.nets import heads
from rl.ops import losses
from rl.ops.advantages import masked_mean


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
    check_divisible(policy_train_steps_per_epoch, policy_evals_per_epoch,
                    'policy_train_steps_per_epoch', 'policy_evals_per_epoch')
    self.dist = networks.policy_distribution(task, type(self).__name__)
    self.batch_size = policy_batch_size
    self.train_steps = policy_train_steps_per_epoch
    self.evals = policy_evals_per_epoch
    self.eval_steps = policy_eval_steps
    self.max_slice_length = max_slice_length
    self._model = policy_model or heads.Policy
    self._optimizer = (policy_optimizer, policy_lr_schedule)
    self.policy_net = None

  def build_networks(self):
    self.policy_net = networks.build_network(
        self.task, self._model(policy_distribution=self.dist), *self._optimizer, 'policy_loss',
        (networks.example_observation(self.task),))
    return {'policy': self.policy_net}, Acting('policy', self.dist)

  def policy_batch(self, rows):
    """One policy batch from its slices' rows (pure)."""
    raise NotImplementedError(f'{type(self).__name__} gives no policy_batch')

  def policy_loss(self, variables, batch):
    """(loss, metrics) of the policy with `variables` on a policy batch (pure)."""
    raise NotImplementedError(f'{type(self).__name__} gives no policy_loss')

  def epoch_data(self, epoch):
    del epoch
    return {'policy': self.task.slice_data([-1])}

  def update(self, state, data):
    def draw_table(nets, data, key):
      del nets, key
      return data, slices.draw_table(data, self.max_slice_length)

    def draw(data, key):
      data, table = data
      return slices.draw(data, key, self.batch_size, self.max_slice_length, table=table)

    step, metrics = one_network_step(self.policy_net.tx, 'policy', self.policy_loss,
                                     lambda nets, rows, key: self.policy_batch(rows))
    nets, key, records = fused_epoch(
        step, state.nets, data['policy'], state.train_key, draw=draw, take=slices.take_slices,
        prepare=draw_table, evaluate=metrics, n_chunks=self.evals,
        steps_per_chunk=self.train_steps // self.evals, n_eval_steps=self.eval_steps,
        batch_sharding=self.policy_net.batch_sharding)
    return state._replace(nets=nets, train_key=key), records, {}


@configurable(denylist=['task', 'output_dir'])
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

  # Its own names for PolicyTrainer's policy_* parameters.
  fixed_parameters = ('policy_model', 'policy_optimizer', 'policy_lr_schedule',
                      'policy_batch_size', 'policy_train_steps_per_epoch')

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
        [-1], whole_trajectories=self.max_slice_length is None)}

  def policy_batch(self, rows):
    return ReturnsBatch(rows['observation'], rows['action'], rows['return_'], rows['mask'])

  def policy_loss(self, variables, batch):
    dist = self.dist
    dist_inputs = self.policy_net.model.apply(variables, batch.observation)
    log_probs = dist.log_prob(dist_inputs, batch.action)
    loss = losses.reinforce_loss(log_probs, batch.return_, batch.mask)
    return loss, {'policy_loss': loss,
                  'policy_entropy': masked_mean(dist.entropy(dist_inputs), batch.mask),
                  'return_mean': masked_mean(batch.return_, batch.mask)}
