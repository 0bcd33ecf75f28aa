"""Joint actor-critic trainers: one PolicyAndValue network, one loss, one optimizer.

The advantages are computed inside the jitted loss from the network's own
values (without gradient) over slices of max_slice_length trained steps plus
`added_policy_slice_length` bootstrap steps, so the whole update is a single
compiled step. With the default monte_carlo estimator and no margin the
advantage is the reference's A = R - V; with @gae and a margin it is GAE.
The value target is V + A (the estimator's return) and the value loss is
value_loss_coeff * masked mean squared error. PPOJoint, A2CJoint and AWRJoint
share their policy terms with the separate-network trainers (rl.trainers.losses).
"""
import gin
import jax
import jax.numpy as jnp

from rl import advantages as advantages_lib
from rl import models
from rl.trainers import losses
from rl.trainers.base import RLTrainer
from rl.trainers.base import check_divisible
from rl.trainers.base import check_estimator_margin
from rl.trainers.base import check_on_policy
from rl.trainers.base import check_whole_episodes
from rl.trainers.policy import build_trainer
from rl.trainers.policy import example_observation
from rl.trainers.policy import policy_distribution


class ActorCriticJointTrainer(RLTrainer):
  """Trains a PolicyAndValue model with one supervised Trainer.

  Args:
    task: the RLTask.
    joint_model: model factory (gin: @PolicyAndValue; `joint=False` gives
      separate bodies), called with the action distribution.
    optimizer: optimizer factory (gin: @Adam, @RMSProp, @SGD).
    lr_schedule: learning-rate schedule factory (gin: @multifactor).
    batch_size: slices per batch.
    train_steps_per_epoch: gradient steps per epoch.
    supervised_evals_per_epoch: the steps run in this many chunks, with
      metrics after each (only affects reporting).
    supervised_eval_steps: batches the metrics are averaged over.
    n_trajectories_per_epoch: complete trajectories collected per epoch (or
      give n_interactions_per_epoch).
    max_slice_length: trained steps per slice.
    normalize_advantages: normalise advantages over the real steps of a batch.
    n_replay_epochs: epochs the buffer keeps (on-policy trainers need 1).
    value_loss_coeff: weight of the value loss in the joint loss.
    advantage_estimator: gin factory (@monte_carlo, @gae, @td_lambda, @td_k).
    added_policy_slice_length: bootstrap steps after the trained ones (the
      estimator's margin; bootstrapping estimators need >= 1).
    scale_value_targets: the value head predicts returns * (1 - gamma).
    output_dir: the run's folder (set by the runner).
    **kwargs: RLTrainer's arguments (n_eval_episodes, eval_temperatures,
      eval_every, n_interactions_per_epoch, only_eval, collect_per_epoch).
  """

  on_policy = False

  def __init__(self, task, joint_model=None, optimizer=None, lr_schedule=None, batch_size=64,
               train_steps_per_epoch=500, supervised_evals_per_epoch=1,
               supervised_eval_steps=1, n_trajectories_per_epoch=None, max_slice_length=1,
               normalize_advantages=True, n_replay_epochs=1, value_loss_coeff=0.1,
               advantage_estimator=None, added_policy_slice_length=0,
               scale_value_targets=False, output_dir=None, **kwargs):
    check_on_policy(self, n_replay_epochs, 'AWRJoint')
    check_divisible(train_steps_per_epoch, supervised_evals_per_epoch,
                    'train_steps_per_epoch', 'supervised_evals_per_epoch')
    advantage_estimator = advantage_estimator or advantages_lib.monte_carlo
    check_estimator_margin(self, advantage_estimator, added_policy_slice_length)
    if advantage_estimator is advantages_lib.monte_carlo:
      check_whole_episodes(self, task, dict(kwargs, n_trajectories_per_epoch=n_trajectories_per_epoch),
                           'use a bootstrapping estimator (@gae with added_policy_slice_length >= 1)')
    super().__init__(task, n_trajectories_per_epoch=n_trajectories_per_epoch,
                     output_dir=output_dir, **kwargs)
    task.set_n_replay_epochs(n_replay_epochs)
    self._batch_size = batch_size
    self._train_steps = train_steps_per_epoch
    self._evals = supervised_evals_per_epoch
    self._eval_steps = supervised_eval_steps
    self._max_slice_length = max_slice_length
    self._margin = int(added_policy_slice_length)
    self._normalize = normalize_advantages
    self._value_loss_coeff = value_loss_coeff
    self._value_scale = 1.0 / (1.0 - task.gamma) if scale_value_targets else 1.0
    self._estimator = advantage_estimator(gamma=task.gamma, margin=self._margin)
    self._dist = policy_distribution(task, type(self).__name__)
    model = (joint_model or models.PolicyAndValue)(policy_distribution=self._dist)
    self._trainer = build_trainer(task, model, optimizer, lr_schedule, self.joint_loss,
                                  self.batches_stream, self.metrics, 'joint_loss',
                                  (example_observation(task),))
    self._trainers['joint'] = self._trainer
    self.init_collect_model_state(self._trainer.model_state)
    self._set_acting_model(model, self._dist, lambda: self._trainer.variables,
                           output_fn=lambda out: out[0])

  # -- batches and the shared terms ---------------------------------------------------

  def batches_stream(self):
    """(obs, actions, rewards, returns, dones, old dist_inputs, mask), [B, L + margin]."""
    for batch in self.task.trajectory_batch_stream(
        self._batch_size, epochs=[-1] if self.on_policy else None,
        max_slice_length=self._max_slice_length + self._margin, margin=self._margin):
      yield (batch.observation, batch.action, batch.reward, batch.return_, batch.done,
             batch.dist_inputs, batch.mask)

  def _terms(self, outputs, actions, rewards, returns, dones, old_dist_inputs, mask):
    """Everything the losses and metrics need, on the trained positions [B, L]."""
    dist_inputs, values = outputs
    values = values[..., 0] * self._value_scale
    length = self._max_slice_length
    adv = self._estimator(rewards, returns, jax.lax.stop_gradient(values), dones, mask)
    real = mask[:, :length]
    values = values[:, :length]
    targets = jax.lax.stop_gradient(values) + adv
    dist_inputs = dist_inputs[:, :length]
    actions = actions[:, :length]
    return {
        'mask': real,
        'advantages': adv,
        'normalized': (losses.normalize_advantages(adv, real) if self._normalize else adv),
        'values': values,
        'targets': targets,
        'log_probs': self._dist.log_prob(dist_inputs, actions),
        'old_log_probs': self._dist.log_prob(old_dist_inputs[:, :length], actions),
        'entropy': self._dist.entropy(dist_inputs),
        'dist_inputs': dist_inputs,
    }

  def _value_loss(self, t):
    scale = self._value_scale
    return self._value_loss_coeff * losses.value_loss(t['values'] / scale,
                                                      t['targets'] / scale, t['mask'])

  def policy_loss_given(self, t):
    """The algorithm's policy part of the joint loss."""
    raise NotImplementedError

  def joint_loss(self, outputs, *batch):
    t = self._terms(outputs, *batch)
    return self.policy_loss_given(t) + self._value_loss(t)

  def extra_metrics(self, t):
    """Subclass hook: algorithm-specific metrics of the terms."""
    del t
    return {}

  @property
  def metrics(self):
    def all_metrics(outputs, *batch):
      t = self._terms(outputs, *batch)
      mask = t['mask']
      greedy = self._dist.mode(t['dist_inputs']).astype(jnp.float32)
      greedy = greedy.reshape(greedy.shape[:2] + (-1,)).mean(-1)
      return {
          'joint_loss': self.policy_loss_given(t) + self._value_loss(t),
          'advantage_mean': losses.masked_mean(t['advantages'], mask),
          'advantage_norm': losses.advantage_norm(t['advantages'], mask),
          'value_loss': self._value_loss(t),
          'explained_variance': losses.explained_variance(t['targets'], t['values'], mask),
          'log_probs_mean': losses.masked_mean(t['log_probs'], mask),
          'preferred_move': losses.masked_mean(greedy, mask),
          **self.extra_metrics(t),
      }
    return _split_metrics(all_metrics, self.metric_names)

  @property
  def metric_names(self):
    return ('joint_loss', 'advantage_mean', 'advantage_norm', 'value_loss',
            'explained_variance', 'log_probs_mean', 'preferred_move')

  def train_epoch(self):
    self.use_acting_statistics(self._trainer)
    metrics = {}
    for _ in range(self._evals):
      metrics = self._trainer.train_epoch(self._train_steps // self._evals, self._eval_steps)
    return metrics


def _split_metrics(all_metrics, names):
  """{name: fn} views of one function returning every metric (XLA shares the work)."""
  return {name: (lambda *args, name=name: all_metrics(*args)[name]) for name in names}


@gin.configurable(denylist=['task', 'output_dir'])
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
    self._epsilon = epsilon
    self._entropy_coeff = entropy_coeff
    super().__init__(task, value_loss_coeff=value_loss_coeff, **kwargs)

  def policy_loss_given(self, t):
    return losses.ppo_loss(t['log_probs'], t['old_log_probs'], t['normalized'], t['entropy'],
                           t['mask'], self._epsilon, self._entropy_coeff)

  def extra_metrics(self, t):
    return {'entropy_loss': self._entropy_coeff * losses.masked_mean(t['entropy'], t['mask']),
            **losses.ppo_diagnostics(t['log_probs'], t['old_log_probs'], t['mask'],
                                     self._epsilon)}

  @property
  def metric_names(self):
    return super().metric_names + ('entropy_loss', 'probs_ratio_mean', 'clip_fraction',
                                   'approximate_kl_divergence')


@gin.configurable(denylist=['task', 'output_dir'])
class A2CJoint(ActorCriticJointTrainer):
  """Advantage actor-critic on a joint policy-and-value network.

  Args:
    value_loss_coeff: weight of the value loss.
    entropy_coeff: weight of the entropy bonus.
    **kwargs: ActorCriticJointTrainer's arguments.
  """

  on_policy = True

  def __init__(self, task, value_loss_coeff=0.1, entropy_coeff=0.01, **kwargs):
    self._entropy_coeff = entropy_coeff
    super().__init__(task, value_loss_coeff=value_loss_coeff, **kwargs)

  def policy_loss_given(self, t):
    return losses.a2c_loss(t['log_probs'], t['normalized'], t['entropy'], t['mask'],
                           self._entropy_coeff)

  def extra_metrics(self, t):
    return {'entropy_loss': self._entropy_coeff * losses.masked_mean(t['entropy'], t['mask'])}

  @property
  def metric_names(self):
    return super().metric_names + ('entropy_loss',)


@gin.configurable(denylist=['task', 'output_dir'])
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
    self._beta = beta
    self._w_max = w_max
    self._thresholds = tuple(tuple(x) for x in thresholds) if thresholds else None
    super().__init__(task, value_loss_coeff=value_loss_coeff, **kwargs)

  def policy_loss_given(self, t):
    weights = losses.awr_weights(t['normalized'], t['mask'], self._beta, self._w_max,
                                 self._thresholds)
    return losses.awr_loss(t['log_probs'], weights, t['mask'])
