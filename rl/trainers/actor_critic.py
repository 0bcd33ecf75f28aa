"""Actor-critic trainers with separate policy and value networks.

ActorCriticTrainer adds a value network, its target copy and the advantage
computation to PolicyTrainer; A2C, PPO and AWR differ only in the loss they
apply to (log pi_new, log pi_old, normalised advantages); SamplingAWR trains
the policy on Q-values of several actions sampled per state.

Value targets are V_target(s_t) + A_t = the estimator's return, computed with
the target network (synced before value training, after each value chunk and
before policy training), so the value net regresses on TD / GAE / MC returns.
"""
import gin
import jax
import jax.numpy as jnp
import numpy as np

from rl import advantages as advantages_lib
from rl import models
from rl.errors import ConfigError
from rl.trainers import losses
from rl.trainers import q_values as q_values_lib
from rl.trainers.base import check_divisible
from rl.trainers.base import prefix_trainer_metrics
from rl.trainers.base import check_estimator_margin
from rl.trainers.base import check_on_policy
from rl.trainers.base import check_whole_episodes
from rl.trainers.policy import PolicyTrainer
from rl.trainers.policy import build_trainer
from rl.trainers.policy import example_observation


class ActorCriticTrainer(PolicyTrainer):
  """Policy and value networks trained in turn on the task's trajectories.

  Args:
    task: the RLTask.
    value_model: value model factory (gin: @Value).
    value_optimizer: optimizer factory of the value network.
    value_lr_schedule: learning-rate schedule factory of the value network
      (e.g. a scoped @value/multifactor).
    value_batch_size: slices per value batch.
    value_train_steps_per_epoch: value gradient steps per epoch.
    value_evals_per_epoch: the value steps run in this many chunks; the target
      network is re-synced after each chunk.
    value_eval_steps: batches the value metrics are averaged over.
    n_shared_layers: the first n top-level layers (normaliser, body, ...) are
      copied policy -> value before value training and back after it.
    added_policy_slice_length: extra steps after each trained position that
      the advantage estimator bootstraps through (its margin). Bootstrapping
      estimators (the default @gae among them) need >= 1. The default 64 lets
      GAE with its default lambda (0.95) and RLTask's default gamma (0.99) see
      all but (0.99 * 0.95)^64 = 2% of its weight before it bootstraps.
    n_replay_epochs: epochs of data the buffer keeps and the trainers sample;
      on-policy trainers (A2C, PPO) need 1.
    scale_value_targets: train the value net on targets * (1 - gamma), so its
      outputs stay O(reward) whatever the horizon.
    q_value: train a Q(s, a) network instead of V(s); state values are
      aggregates of Q over actions sampled from the stored behaviour policy.
    q_value_aggregate: 'mean' | 'max' | 'softmax' | 'logsumexp'.
    q_value_aggregate_max: deprecated boolean alias (True = 'max', False = 'mean').
    q_value_temperature: temperature of 'softmax' and 'logsumexp'.
    q_value_n_samples: actions sampled per state; equal to the number of
      discrete actions (or 'all') enumerates every action.
    advantage_estimator: gin factory (@gae, @td_lambda, @td_k, @monte_carlo).
    advantage_normalization: normalise advantages over the real steps of
      each batch before the policy loss.
    advantage_normalization_epsilon: added to the std when normalising.
    advantage_normalization_factor: multiplies the normalised advantages.
    **kwargs: PolicyTrainer's and RLTrainer's arguments.
  """

  on_policy = False
  # The value network's summaries (value_loss, value_mean, value_learning_rate, ...).
  summary_dirs = {'value': 'value_'}

  def __init__(self, task, value_model=None, value_optimizer=None, value_lr_schedule=None,
               value_batch_size=64, value_train_steps_per_epoch=500, value_evals_per_epoch=1,
               value_eval_steps=1, n_shared_layers=0, added_policy_slice_length=64,
               n_replay_epochs=1, scale_value_targets=False, q_value=False,
               q_value_aggregate=None, q_value_aggregate_max=None,
               q_value_temperature=1.0, q_value_n_samples=1, advantage_estimator=None,
               advantage_normalization=True, advantage_normalization_epsilon=1e-5,
               advantage_normalization_factor=1.0, **kwargs):
    name = type(self).__name__
    check_on_policy(self, n_replay_epochs, 'AWR or SamplingAWR')
    check_divisible(value_train_steps_per_epoch, value_evals_per_epoch,
                    'value_train_steps_per_epoch', 'value_evals_per_epoch')
    if q_value_aggregate_max is not None:
      if q_value_aggregate is not None:
        raise ConfigError(f'{name}: give q_value_aggregate or its old alias '
                          'q_value_aggregate_max, not both.')
      q_value_aggregate = 'max' if q_value_aggregate_max else 'mean'
    q_value_aggregate = q_value_aggregate or 'logsumexp'
    if q_value_aggregate not in q_values_lib.AGGREGATES:
      raise ConfigError(f"{name}.q_value_aggregate must be one of "
                        f"{', '.join(q_values_lib.AGGREGATES)}; got '{q_value_aggregate}'.")
    advantage_estimator = advantage_estimator or advantages_lib.gae
    check_estimator_margin(self, advantage_estimator, added_policy_slice_length)
    if advantage_estimator is advantages_lib.monte_carlo:
      check_whole_episodes(self, task, kwargs, 'use a bootstrapping estimator (@gae with added_policy_slice_length >= 1)')
    space = task.action_space
    self._n_actions = int(space.n) if hasattr(space, 'n') else None
    self._sample_all = q_value and (
        q_value_n_samples == 'all' or q_value_n_samples == self._n_actions)
    if q_value and q_value_n_samples == 'all' and self._n_actions is None:
      raise ConfigError(f'{name}: q_value_n_samples = all actions needs a Discrete action '
                        f'space, but {task.env_name} has {space}; sample a number instead.')
    if q_value and not (hasattr(space, 'n') or len(space.shape) == 1):
      raise ConfigError(f'{name}: q_value supports Discrete or 1-D Box action spaces, '
                        f'not {space}.')
    self._q_value = q_value
    self._q_aggregate = q_value_aggregate
    self._q_temperature = float(q_value_temperature)
    if q_value and not self._sample_all and (
        not isinstance(q_value_n_samples, int) or q_value_n_samples < 1):
      raise ConfigError(f"{name}.q_value_n_samples must be a positive integer or 'all', "
                        f'got {q_value_n_samples!r}.')
    self._q_n_samples = self._n_actions if self._sample_all else q_value_n_samples
    self._margin = int(added_policy_slice_length)
    self._n_shared_layers = int(n_shared_layers)
    self._adv_normalization = advantage_normalization
    self._adv_epsilon = advantage_normalization_epsilon
    self._adv_factor = advantage_normalization_factor
    self._value_scale = 1.0 / (1.0 - task.gamma) if scale_value_targets else 1.0
    self._estimator = advantage_estimator(gamma=task.gamma, margin=self._margin)
    task.set_n_replay_epochs(n_replay_epochs)
    super().__init__(task, **kwargs)

    self._value_batch_size = value_batch_size
    self._value_train_steps = value_train_steps_per_epoch
    self._value_evals = value_evals_per_epoch
    self._value_eval_steps = value_eval_steps
    value_kwargs = {}
    example = (example_observation(task),)
    if q_value:
      value_kwargs = dict(inject_actions=True, is_discrete=self._n_actions is not None,
                          vocab_size=self._n_actions or 2)
      example += (np.zeros((1, 1) + tuple(space.shape), space.dtype),)
    self._value_model = (value_model or models.Value)(**value_kwargs)
    self._value_trainer = build_trainer(
        task, self._value_model, value_optimizer, value_lr_schedule, self._value_loss,
        self.value_batches_stream, self.value_metrics, 'value_loss', example,
        n_model_inputs=len(example), seed_offset=1)
    self._trainers['value'] = self._value_trainer
    self._check_shared_layers(name)
    self._stream_key = jax.random.PRNGKey(task.seed + 2)
    self._target = self._value_trainer.variables
    # Batch preparation runs once per gradient step: one jitted call each.
    self._advantages_fn = jax.jit(self._advantages_impl, static_argnames=('mode',))

  def _check_shared_layers(self, name):
    """n_shared_layers must name layers both networks have, in the same order."""
    policy = models.top_level_layers(self._policy_trainer.variables)
    value = models.top_level_layers(self._value_trainer.variables)
    common = 0
    while common < min(len(policy), len(value)) and policy[common] == value[common]:
      common += 1
    if not 0 <= self._n_shared_layers <= common:
      raise ConfigError(
          f'{name}.n_shared_layers must be between 0 and {common}: the policy layers '
          f'{policy} and the value layers {value} share their first {common}.')

  # -- values -------------------------------------------------------------------------

  def _value_loss(self, values, *rest):
    targets, mask = rest[-2], rest[-1]
    return losses.value_loss(values[..., 0], targets, mask)

  @property
  def value_metrics(self):
    scale = self._value_scale

    def value_mean(values, *rest):
      return losses.masked_mean(values[..., 0] * scale, rest[-1])

    return {'value_loss': self._value_loss, 'value_mean': value_mean}

  def _sample_actions(self, dist_inputs, key):
    """n actions per state [B, n, L] and their log-probs under the stored policy."""
    dist = self._policy_dist
    batch, length = dist_inputs.shape[:2]
    n = self._q_n_samples
    if self._sample_all:
      actions = jnp.broadcast_to(jnp.arange(n)[None, :, None], (batch, n, length))
    else:
      tiled = jnp.broadcast_to(dist_inputs[:, None], (batch, n) + dist_inputs.shape[1:])
      actions = dist.sample(tiled, key, 1.0)
    log_probs = dist.log_prob(jnp.broadcast_to(dist_inputs[:, None], (batch, n) +
                                               dist_inputs.shape[1:]), actions)
    return actions, log_probs

  def _state_values_impl(self, variables, obs, dist_inputs, key, mode):
    """V(s) [B, L] from the target network, aggregating Q over actions if q_value."""
    if not self._q_value:
      return self._value_model.apply(variables, obs)[..., 0] * self._value_scale
    actions, log_probs = self._sample_actions(dist_inputs, key)
    q = self._value_model.apply(variables, obs, actions)[..., 0] * self._value_scale
    return q_values_lib.aggregate(q, log_probs, mode, self._q_temperature, self._sample_all)

  def _advantages_impl(self, variables, batch, key, mode):
    """State values [B, L] and advantages [B, L - margin] of a batch, in one jitted call."""
    key, sample_key = jax.random.split(key)
    values = self._state_values_impl(variables, batch.observation, batch.dist_inputs,
                                     sample_key, mode)
    adv = self._estimator(batch.reward, batch.return_, values, batch.done, batch.mask)
    return values, adv, key

  def _slices(self, batch_size, epochs=None):
    """Batches of slices of max_slice_length trained steps plus the margin."""
    return self.task.trajectory_batch_stream(
        batch_size, epochs=epochs, max_slice_length=self._max_slice_length + self._margin,
        margin=self._margin)

  def _advantages(self, batch, mode):
    values, adv, self._stream_key = self._advantages_fn(self._target, batch,
                                                        self._stream_key, mode=mode)
    return values, adv

  def value_batches_stream(self):
    length = self._max_slice_length
    for batch in self._slices(self._value_batch_size):
      values, adv = self._advantages(batch, self._q_aggregate)
      targets = (values[:, :length] + adv) / self._value_scale
      inputs = (batch.observation[:, :length],)
      if self._q_value:
        inputs += (batch.action[:, :length],)
      yield inputs + (targets, batch.mask[:, :length])

  def _sync_target(self):
    self._target = self._value_trainer.variables

  # -- policy -------------------------------------------------------------------------

  def _policy_epochs(self):
    return [-1] if self.on_policy else None

  def policy_batches_stream(self):
    length = self._max_slice_length
    for batch in self._slices(self._policy_batch_size, self._policy_epochs()):
      _, adv = self._advantages(batch, 'mean')
      yield (batch.observation[:, :length], batch.action[:, :length], adv,
             batch.dist_inputs[:, :length], batch.mask[:, :length])

  def _policy_terms(self, dist_inputs, actions, advantages, old_dist_inputs, mask):
    """log pi_new(a), log pi_old(a), the (normalised) advantages, the entropy."""
    dist = self._policy_dist
    if self._adv_normalization:
      advantages = losses.normalize_advantages(advantages, mask, self._adv_epsilon,
                                               self._adv_factor)
    return (dist.log_prob(dist_inputs, actions), dist.log_prob(old_dist_inputs, actions),
            advantages, dist.entropy(dist_inputs))

  def policy_loss(self, dist_inputs, actions, advantages, old_dist_inputs, mask):
    terms = self._policy_terms(dist_inputs, actions, advantages, old_dist_inputs, mask)
    return self.policy_loss_given(*terms, mask)

  def policy_loss_given(self, log_probs, old_log_probs, advantages, entropy, mask):
    """The algorithm's loss; subclasses implement it with rl.trainers.losses."""
    raise NotImplementedError

  @property
  def policy_metrics(self):
    def advantage_mean(dist_inputs, actions, advantages, old, mask):
      return losses.masked_mean(advantages, mask)

    def advantage_std(dist_inputs, actions, advantages, old, mask):
      mean = losses.masked_mean(advantages, mask)
      return jnp.sqrt(losses.masked_mean((advantages - mean) ** 2, mask))

    def entropy(dist_inputs, actions, advantages, old, mask):
      return losses.masked_mean(self._policy_dist.entropy(dist_inputs), mask)

    return {'policy_loss': self.policy_loss, 'advantage_mean': advantage_mean,
            'advantage_std': advantage_std, 'policy_entropy': entropy}

  # -- the epoch ----------------------------------------------------------------------

  def _copy_shared(self, src, dst):
    """Copies the first n_shared_layers of trainer src into trainer dst."""
    merged = models.copy_shared_layers(src.variables, dst.variables, self._n_shared_layers)
    dst.model_weights = merged.pop('params')
    dst.model_state = merged

  def train_epoch(self):
    # Both nets get the acting statistics before anything is copied: with the
    # normaliser among the shared layers, the copy below hands the policy's
    # statistics to the value net, so the policy's must be current already.
    self.use_acting_statistics(self._policy_trainer)
    self.use_acting_statistics(self._value_trainer)
    if self._n_shared_layers:
      self._copy_shared(self._policy_trainer, self._value_trainer)
    self._sync_target()
    value_metrics = {}
    for _ in range(self._value_evals):
      value_metrics = self._value_trainer.train_epoch(
          self._value_train_steps // self._value_evals, self._value_eval_steps)
      self._sync_target()
    if self._n_shared_layers:
      self._copy_shared(self._value_trainer, self._policy_trainer)
    policy_metrics = self._train_policy()
    return {**policy_metrics, **prefix_trainer_metrics(value_metrics, 'value_')}

  def _extra_arrays(self):
    return {'stream_key': self._stream_key}

  def _load_extra_arrays(self, arrays):
    if 'stream_key' in arrays:
      self._stream_key = jnp.asarray(arrays['stream_key'])
    self._sync_target()


@gin.configurable(denylist=['task', 'output_dir'])
class A2C(ActorCriticTrainer):
  """Advantage actor-critic.

  Args:
    entropy_coeff: weight of the entropy bonus.
    **kwargs: ActorCriticTrainer's arguments.
  """

  on_policy = True

  def __init__(self, task, entropy_coeff=0.01, **kwargs):
    self._entropy_coeff = entropy_coeff
    super().__init__(task, **kwargs)

  def policy_loss_given(self, log_probs, old_log_probs, advantages, entropy, mask):
    del old_log_probs
    return losses.a2c_loss(log_probs, advantages, entropy, mask, self._entropy_coeff)


@gin.configurable(denylist=['task', 'output_dir'])
class PPO(ActorCriticTrainer):
  """Proximal policy optimisation with the clipped surrogate.

  Args:
    epsilon: clipping range of the probability ratio.
    entropy_coeff: weight of the entropy bonus.
    **kwargs: ActorCriticTrainer's arguments.
  """

  on_policy = True

  def __init__(self, task, epsilon=0.2, entropy_coeff=0.01, **kwargs):
    self._epsilon = epsilon
    self._entropy_coeff = entropy_coeff
    super().__init__(task, **kwargs)

  def policy_loss_given(self, log_probs, old_log_probs, advantages, entropy, mask):
    return losses.ppo_loss(log_probs, old_log_probs, advantages, entropy, mask,
                           self._epsilon, self._entropy_coeff)

  @property
  def policy_metrics(self):
    metrics = dict(super().policy_metrics)
    for name in ('probs_ratio_mean', 'clip_fraction', 'approximate_kl_divergence'):
      def metric(dist_inputs, actions, advantages, old, mask, name=name):
        log_probs, old_log_probs, _, _ = self._policy_terms(
            dist_inputs, actions, advantages, old, mask)
        return losses.ppo_diagnostics(log_probs, old_log_probs, mask, self._epsilon)[name]
      metrics[name] = metric
    return metrics


def _awr_metrics(weights_fn):
  """awr_weight_{mean,std,min,max} over real steps, from fn(*batch) -> (weights, mask)."""
  def stat(kind):
    def metric(*batch):
      weights, mask = weights_fn(*batch)
      real = mask > 0
      if kind == 'mean':
        return losses.masked_mean(weights, mask)
      if kind == 'std':
        mean = losses.masked_mean(weights, mask)
        return jnp.sqrt(losses.masked_mean((weights - mean) ** 2, mask))
      if kind == 'min':
        return jnp.min(jnp.where(real, weights, jnp.inf))
      return jnp.max(jnp.where(real, weights, -jnp.inf))
    return metric
  return {f'awr_weight_{k}': stat(k) for k in ('mean', 'std', 'min', 'max')}


@gin.configurable(denylist=['task', 'output_dir'])
class AWR(ActorCriticTrainer):
  """Advantage-weighted regression (off-policy: replays n_replay_epochs epochs).

  Args:
    beta: temperature of the exponentiated advantages.
    w_max: cap on the weights.
    thresholds: optional ((percentile, weight, minimum), ...) step weights
      instead of exp(A / beta).
    **kwargs: ActorCriticTrainer's arguments.
  """

  def __init__(self, task, beta=1.0, w_max=20.0, thresholds=None, **kwargs):
    self._beta = beta
    self._w_max = w_max
    self._thresholds = tuple(tuple(t) for t in thresholds) if thresholds else None
    super().__init__(task, **kwargs)

  def policy_loss_given(self, log_probs, old_log_probs, advantages, entropy, mask):
    del old_log_probs, entropy
    weights = losses.awr_weights(advantages, mask, self._beta, self._w_max, self._thresholds)
    return losses.awr_loss(log_probs, weights, mask)

  @property
  def policy_metrics(self):
    def weights(dist_inputs, actions, advantages, old, mask):
      _, _, adv, _ = self._policy_terms(dist_inputs, actions, advantages, old, mask)
      return losses.awr_weights(adv, mask, self._beta, self._w_max, self._thresholds), mask
    return {**super().policy_metrics, **_awr_metrics(weights)}


@gin.configurable(denylist=['task', 'output_dir'])
class SamplingAWR(ActorCriticTrainer):
  """AWR on Q-values of actions sampled per state (QWR); q_value is forced on.

  Args:
    beta: temperature of the exponentiated advantages.
    w_max: cap on the weights.
    thresholds: optional ((percentile, weight, minimum), ...) step weights.
    reweight: importance-weight each sampled action by pi_new / pi_old.
    q_value_n_samples: actions sampled per state (as in ActorCriticTrainer).
      An advantage is a sample's Q minus the mean Q of its state's samples,
      so one sample (ActorCriticTrainer's default) makes every advantage 0
      and the policy only imitates itself; the default 8 estimates the mean
      for discrete and continuous actions alike.
    **kwargs: ActorCriticTrainer's arguments (q_value_aggregate, ...).
  """

  def __init__(self, task, beta=1.0, w_max=20.0, thresholds=None, reweight=False,
               q_value_n_samples=8, **kwargs):
    self._beta = beta
    self._w_max = w_max
    self._thresholds = tuple(tuple(t) for t in thresholds) if thresholds else None
    self._reweight = reweight
    kwargs['q_value'] = True
    super().__init__(task, q_value_n_samples=q_value_n_samples, **kwargs)
    self._sampled_q_fn = jax.jit(self._sampled_q_impl)

  def _sampled_q_impl(self, variables, obs, dist_inputs, key):
    key, sample_key = jax.random.split(key)
    actions, log_probs = self._sample_actions(dist_inputs, sample_key)
    q = self._value_model.apply(variables, obs, actions)[..., 0] * self._value_scale
    return actions, q, log_probs, key

  def policy_batches_stream(self):
    length = self._max_slice_length
    for batch in self.task.trajectory_batch_stream(
        self._policy_batch_size, max_slice_length=length):
      actions, q, log_probs, self._stream_key = self._sampled_q_fn(
          self._target, batch.observation, batch.dist_inputs, self._stream_key)
      mask = jnp.broadcast_to(batch.mask[:, None], q.shape)
      yield batch.observation, actions, q, log_probs, mask

  def _weights(self, dist_inputs, actions, q, old_log_probs, mask):
    """Per-sample log pi_new, AWR weights and the effective mask, all [B, n, L]."""
    dist = self._policy_dist
    tiled = jnp.broadcast_to(dist_inputs[:, None], q.shape + dist_inputs.shape[2:])
    log_probs = dist.log_prob(tiled, actions)
    values = q_values_lib.aggregate(q, old_log_probs, 'mean', sample_all=self._sample_all)
    adv = q - values[:, None]
    if self._adv_normalization:
      adv = losses.normalize_advantages(adv, mask, self._adv_epsilon, self._adv_factor)
    weights = losses.awr_weights(adv, mask, self._beta, self._w_max, self._thresholds)
    if self._reweight:
      mask = mask * jnp.exp(jax.lax.stop_gradient(log_probs) - old_log_probs)
    if self._sample_all:
      # Enumerated actions are weighted by how likely the behaviour policy was to take them.
      mask = mask * jnp.exp(old_log_probs)
    return log_probs, weights, mask

  def policy_loss(self, dist_inputs, actions, q, old_log_probs, mask):
    log_probs, weights, mask = self._weights(dist_inputs, actions, q, old_log_probs, mask)
    return losses.awr_loss(log_probs, weights, mask)

  @property
  def policy_metrics(self):
    def advantage(q, old_log_probs):
      return q - q_values_lib.aggregate(q, old_log_probs, 'mean',
                                        sample_all=self._sample_all)[:, None]

    def advantage_mean(dist_inputs, actions, q, old, mask):
      return losses.masked_mean(advantage(q, old), mask)

    def advantage_std(dist_inputs, actions, q, old, mask):
      adv = advantage(q, old)
      mean = losses.masked_mean(adv, mask)
      return jnp.sqrt(losses.masked_mean((adv - mean) ** 2, mask))

    def weights(*batch):
      _, w, mask = self._weights(*batch)
      return w, batch[-1]

    return {'policy_loss': self.policy_loss, 'advantage_mean': advantage_mean,
            'advantage_std': advantage_std, **_awr_metrics(weights)}
