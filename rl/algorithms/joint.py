"""Joint actor-critic trainers: one PolicyAndValue network, one loss, one optimizer.

By default (the reference's way) the advantages are computed inside the
jitted loss from the network's own values (without gradient) over slices of
max_slice_length trained steps plus `added_policy_slice_length` bootstrap
steps, so the whole update is a single compiled step. With the default
monte_carlo estimator and no margin the advantage is the reference's
A = R - V; with @gae and a margin it is GAE. The value target is V + A (the
estimator's return) and the value loss is value_loss_coeff * masked mean
squared error.

With `advantages_per_chunk`, every stored step's value and advantage are
computed once at the start of each chunk, from the network as the chunk
starts (as PPO implementations commonly do before their update epochs), and
batches gather them: the network then runs on the trained steps of a batch
only, not on its bootstrap margin too, which with a margin of 64 is 65 times
fewer forward passes per batch (the difference between affordable and not on
pixels).

PPOJoint, A2CJoint and AWRJoint share their policy terms with the
separate-network trainers (rl.ops.losses).
"""
import jax
import jax.numpy as jnp

from rl import ranges
from rl.algorithms import batches
from rl.algorithms import networks
from rl.algorithms.ppo import ppo_diagnostics
from rl.algorithms.ppo import ppo_loss
from rl.configurables import configurable
from rl.data import slices
from rl.data.trajectories import Batch
from rl.learner.acting import Acting
from rl.learner.checks import check_batch_size
from rl.learner.checks import check_divisible
from rl.learner.checks import check_estimator
from rl.learner.checks import check_on_policy
from rl.learner.checks import value_scale_of
from rl.learner.fused_epoch import fused_epoch
from rl.learner.fused_epoch import one_network_step
from rl.learner.fused_epoch import variables_of
from rl.learner.trainer import RLTrainer
from rl.nets import heads
from rl.ops import advantages as advantages_lib
from rl.ops import losses
from rl.ops.advantages import masked_mean
from rl.ops.advantages import normalize_advantages


class ActorCriticJointTrainer(RLTrainer):
  """Trains a PolicyAndValue model: one network, one loss, one optimizer.

  Args:
    task: the RLTask.
    joint_model: model factory (gin: @PolicyAndValue; `joint=False` gives
      separate bodies), called with the action distribution; None:
      @PolicyAndValue.
    optimizer: optimizer factory (gin: @Adam, @RMSProp, @SGD); None: @Adam.
    lr_schedule: learning-rate schedule factory (gin: @multifactor); None:
      @multifactor.
    batch_size: slices per batch.
    train_steps_per_epoch: gradient steps per epoch.
    supervised_evals_per_epoch: the steps run in this many chunks, with
      metrics after each (only affects reporting).
    supervised_eval_steps: 0 (default): the metrics are those of the training
      batches of the last chunk, computed with the loss; N > 0: they are
      evaluated after each chunk on N fresh batches (the reference's way,
      which compiles a second copy of the loss).
    n_trajectories_per_epoch: complete trajectories collected per epoch (or
      give n_interactions_per_epoch).
    max_slice_length: trained steps per slice.
    normalize_advantages: normalise advantages over the real steps of a batch.
    n_replay_epochs: epochs the buffer keeps (on-policy trainers need 1).
    value_loss_coeff: weight of the value loss in the joint loss.
    advantage_estimator: gin factory (@monte_carlo, @gae, @td_lambda, @td_k);
      None: @monte_carlo.
    added_policy_slice_length: bootstrap steps after the trained ones (the
      estimator's margin; bootstrapping estimators need >= 1).
    scale_value_targets: the value head predicts returns * (1 - gamma).
    advantages_per_chunk: False (the reference's way): each batch's
      advantages and value targets come from the network being trained,
      over its slices plus the margin, inside the loss. True: they are
      computed for every stored step at the start of each of the
      supervised_evals_per_epoch chunks, from the network as it stands then,
      and batches of max_slice_length steps gather them (see the module doc).
    output_dir: the run's folder (set by the runner).
    **kwargs: RLTrainer's arguments (n_eval_episodes, eval_temperatures,
      eval_every, n_interactions_per_epoch, only_eval, collect_per_epoch).
  """

  on_policy = False
  supports_jax_envs = True

  def __init__(self, task, joint_model=None, optimizer=None, lr_schedule=None, batch_size=64,
               train_steps_per_epoch=500, supervised_evals_per_epoch=1,
               supervised_eval_steps=0, n_trajectories_per_epoch=None, max_slice_length=1,
               normalize_advantages=True, n_replay_epochs=1, value_loss_coeff=0.1,
               advantage_estimator=None, added_policy_slice_length=0,
               scale_value_targets=False, advantages_per_chunk=False, output_dir=None,
               **kwargs):
    super().__init__(task, n_trajectories_per_epoch=n_trajectories_per_epoch,
                     output_dir=output_dir, **kwargs)
    check_on_policy(self, n_replay_epochs, 'AWRJoint')
    check_divisible(train_steps_per_epoch, supervised_evals_per_epoch,
                    'train_steps_per_epoch', 'supervised_evals_per_epoch')
    self.margin = int(added_policy_slice_length)
    self._estimator = (advantage_estimator or advantages_lib.monte_carlo)(gamma=task.gamma,
                                                                           margin=self.margin)
    check_estimator(self, self._estimator,
                    f'added_policy_slice_length must be >= 1 (got {self.margin})', task,
                    dict(kwargs, n_trajectories_per_epoch=n_trajectories_per_epoch),
                    'use a bootstrapping estimator (@gae with added_policy_slice_length >= 1)')
    check_batch_size(self, 'batch_size', batch_size, n_replay_epochs)
    ranges.in_range(f'{type(self).__name__}.value_loss_coeff', value_loss_coeff, low=0)
    self.n_replay_epochs = int(n_replay_epochs)
    self._joint_model_factory = joint_model or heads.PolicyAndValue
    self._optimizer = optimizer
    self._lr_schedule = lr_schedule
    self._batch_size = batch_size
    self._train_steps = train_steps_per_epoch
    self._evals = supervised_evals_per_epoch
    self._eval_steps = supervised_eval_steps
    self.max_slice_length = max_slice_length
    self._normalize = normalize_advantages
    self._value_loss_coeff = value_loss_coeff
    self._value_scale = value_scale_of(self, task, scale_value_targets)
    self._dist = networks.policy_distribution(task, type(self).__name__)
    self.per_chunk = bool(advantages_per_chunk)


  def build_networks(self):
    self.joint_net = networks.build_network(
        self.task, self._joint_model_factory(policy_distribution=self._dist), self._optimizer,
        self._lr_schedule, 'joint_loss', (networks.example_observation(self.task),))
    return {'joint': self.joint_net}, Acting('joint', self._dist, output_fn=lambda out: out[0])

  # -- batches and the loss -----------------------------------------------------------

  def joint_advantages(self, nets, data, key):
    """(`data` with every row's advantage and value target under the joint network as the
    chunk starts, the table its batches are drawn from), once per chunk."""
    scale, variables = self._value_scale, variables_of(nets['joint'])

    def state_values(obs, dist_inputs, k):
      del dist_inputs, k
      return self.joint_net.model.apply(variables, obs)[1][..., 0] * scale
    values = slices.row_values(data, self.task.observation_space, key, state_values)
    adv = slices.row_advantages(data, values, self._estimator)
    data = data.replace(rows=dict(data.rows, advantage=adv, value_target=values + adv))
    # The draw table is the same for every batch of the chunk: made here once
    # rather than inside each gradient step.
    return data, slices.draw_table(data, self.max_slice_length)

  def draw_joint(self, data, key):
    """Which rows a batch holds: slices of max_slice_length trained steps plus the margin,
    or per chunk the trained steps alone. `data` is (the SliceData, its slices.DrawTable)."""
    data, table = data
    if self.per_chunk:
      return slices.draw(data, key, self._batch_size, self.max_slice_length, table=table)
    return slices.draw(data, key, self._batch_size, self.max_slice_length + self.margin,
                       margin=self.margin, table=table)

  def joint_batch(self, rows):
    """A task Batch [B, L + margin] of the slices' rows; per chunk, a JointBatch [B, L]
    of the trained steps with their advantages."""
    if self.per_chunk:
      return batches.JointBatch(rows['observation'], rows['action'], rows['advantage'],
                                rows['value_target'], rows['dist_inputs'], rows['mask'])
    return Batch(**rows)

  def _terms(self, outputs, batch):
    """Everything the loss and its metrics need, on the trained positions [B, L]."""
    dist_inputs, values = outputs
    values = values[..., 0] * self._value_scale
    length = self.max_slice_length
    if self.per_chunk:
      adv = batch.advantage
    else:
      adv = self._estimator(batch.reward, batch.return_, jax.lax.stop_gradient(values),
                            batch.done, batch.mask)
    real = batch.mask[:, :length]
    values = values[:, :length]
    targets = (batch.value_target if self.per_chunk
               else jax.lax.stop_gradient(values) + adv)
    dist_inputs = dist_inputs[:, :length]
    actions = batch.action[:, :length]
    return {
        'mask': real,
        'advantages': adv,
        'normalized': (normalize_advantages(adv, real) if self._normalize else adv),
        'values': values,
        'targets': targets,
        'log_probs': self._dist.log_prob(dist_inputs, actions),
        'old_log_probs': self._dist.log_prob(batch.dist_inputs[:, :length], actions),
        'entropy': self._dist.entropy(dist_inputs),
        'dist_inputs': dist_inputs,
    }

  def objective(self, t, extra):
    """The variant's policy part of the joint loss and its extra metrics, from the terms
    `t` (a dict of [B, L] arrays) and the TrainState's per-epoch values `extra`."""
    raise NotImplementedError(f'{type(self).__name__} gives no objective')

  def joint_loss(self, variables, batch, extra):
    """(loss, metrics) of the joint network's (dist_inputs, values) on a Batch."""
    t = self._terms(self.joint_net.model.apply(variables, batch.observation), batch)
    mask = t['mask']
    scale = self._value_scale
    value_loss = self.traced('value_loss_coeff', self._value_loss_coeff) * masked_mean(
        (t['values'] / scale - t['targets'] / scale) ** 2, mask)
    policy_loss, policy_metrics = self.objective(t, extra)
    loss = policy_loss + value_loss
    greedy = self._dist.mode(t['dist_inputs']).astype(jnp.float32)
    greedy = greedy.reshape(greedy.shape[:2] + (-1,)).mean(-1)
    return loss, {
        'joint_loss': loss,
        'advantage_mean': masked_mean(t['advantages'], mask),
        'advantage_norm': losses.advantage_norm(t['advantages'], mask),
        'value_loss': value_loss,
        'explained_variance': losses.explained_variance(t['targets'], t['values'], mask),
        'log_probs_mean': masked_mean(t['log_probs'], mask),
        'preferred_move': masked_mean(greedy, mask),
        **policy_metrics,
    }

  def epoch_data(self, epoch):
    del epoch
    return {'joint': self.task.slice_data([-1] if self.on_policy else None)}

  def rollout_data(self, newest, replay, epoch):
    del epoch
    return {'joint': newest if self.on_policy else replay}

  def update(self, state, data):
    data = data['joint']
    if not self.per_chunk:
      window = self.max_slice_length + self.margin
      data = (data, slices.draw_table(data, window, self.margin))

    step, metrics = one_network_step(self.joint_net.tx, 'joint', self.joint_loss,
                                     lambda nets, rows, key: self.joint_batch(rows), state.extra)
    nets, key, records = fused_epoch(
        step, state.nets, data, state.train_key, draw=self.draw_joint, take=slices.take_slices,
        prepare=self.joint_advantages if self.per_chunk else None, evaluate=metrics,
        n_chunks=self._evals, steps_per_chunk=self._train_steps // self._evals,
        n_eval_steps=self._eval_steps, batch_sharding=self.joint_net.batch_sharding)
    return state._replace(nets=nets, train_key=key), records, {}


@configurable(denylist=['task', 'output_dir'])
class PPOJoint(ActorCriticJointTrainer):
  """PPO-clip on a joint policy-and-value network.

  Args:
    epsilon: clipping range of the probability ratio.
    value_loss_coeff: weight of the value loss.
    entropy_coeff: weight of the entropy bonus.
    **kwargs: ActorCriticJointTrainer's arguments.
  """

  on_policy = True

  def __init__(self, task, epsilon=0.2, value_loss_coeff=0.1, entropy_coeff=0.01, **kwargs):
    ranges.in_range(f'{type(self).__name__}.epsilon', epsilon, low=0, low_open=True,
                    why='a clip range of the probability ratio')
    self.epsilon = epsilon
    self.entropy_coeff = entropy_coeff
    super().__init__(task, value_loss_coeff=value_loss_coeff, **kwargs)

  def objective(self, t, extra):
    del extra
    epsilon = self.traced('epsilon', self.epsilon)
    entropy_coeff = self.traced('entropy_coeff', self.entropy_coeff)
    loss = ppo_loss(t['log_probs'], t['old_log_probs'], t['normalized'], t['entropy'],
                    t['mask'], epsilon, entropy_coeff)
    return loss, {
        'entropy_loss': entropy_coeff * masked_mean(t['entropy'], t['mask']),
        **ppo_diagnostics(t['log_probs'], t['old_log_probs'], t['mask'], epsilon)}


@configurable(denylist=['task', 'output_dir'])
class A2CJoint(ActorCriticJointTrainer):
  """Advantage actor-critic on a joint policy-and-value network.

  Args:
    value_loss_coeff: weight of the value loss.
    entropy_coeff: weight of the entropy bonus.
    **kwargs: ActorCriticJointTrainer's arguments.
  """

  on_policy = True

  def __init__(self, task, value_loss_coeff=0.1, entropy_coeff=0.01, **kwargs):
    self.entropy_coeff = entropy_coeff
    super().__init__(task, value_loss_coeff=value_loss_coeff, **kwargs)

  def objective(self, t, extra):
    del extra
    entropy_coeff = self.traced('entropy_coeff', self.entropy_coeff)
    loss = losses.a2c_loss(t['log_probs'], t['normalized'], t['entropy'], t['mask'],
                           entropy_coeff)
    return loss, {'entropy_loss': entropy_coeff * masked_mean(t['entropy'], t['mask'])}


@configurable(denylist=['task', 'output_dir'])
class AWRJoint(ActorCriticJointTrainer):
  """Advantage-weighted regression on a joint network (off-policy: replays epochs).

  Args:
    value_loss_coeff: weight of the value loss.
    beta: temperature of the exponentiated advantages.
    w_max: cap on the weights.
    thresholds: optional ((percentile, weight, minimum), ...) step weights.
    **kwargs: ActorCriticJointTrainer's arguments.
  """

  def __init__(self, task, value_loss_coeff=0.1, beta=1.0, w_max=20.0, thresholds=None,
               **kwargs):
    self.beta = beta
    self.w_max = w_max
    self.thresholds = tuple(tuple(x) for x in thresholds) if thresholds else None
    super().__init__(task, value_loss_coeff=value_loss_coeff, **kwargs)

  def objective(self, t, extra):
    del extra
    weights = losses.awr_weights(t['normalized'], t['mask'], self.beta, self.w_max,
                                 self.thresholds)
    return losses.awr_loss(t['log_probs'], weights, t['mask']), {}
