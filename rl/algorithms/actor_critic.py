"""Actor-critic trainers with separate policy and value networks.

ActorCriticTrainer adds a value network, its target copy and the advantage
computation to PolicyTrainer; A2C, PPO and AWR differ only in the loss they
apply to (log pi_new, log pi_old, normalised advantages); SamplingAWR trains
the policy on Q-values of several actions sampled per state.

Value targets are V_target(s_t) + A_t = the estimator's return, computed with
the target network (synced before value training, after each value chunk and
before policy training), so the value net regresses on TD / GAE / MC returns.
While a chunk holds its value network fixed, every stored step's value and
advantage are computed once at the chunk's start (`row_advantages`: each step
looks `added_policy_slice_length` steps ahead) and the chunk's batches gather
them, instead of recomputing them for every sampled slice.
"""
import gin
import jax
import jax.numpy as jnp
import numpy as np

from rl.ops import advantages as advantages_lib
from rl.nets import models
from rl.data import slices
from rl.errors import ConfigError
from rl.algorithms import batches
from rl.ops import losses
from rl.ops import q_values as q_values_lib
from rl.learner.base import check_divisible
from rl.learner.base import check_estimator_margin
from rl.learner.base import check_on_policy
from rl.learner.base import check_whole_episodes
from rl.algorithms.policy import PolicyTrainer
from rl.algorithms.policy import build_trainer
from rl.algorithms.policy import example_observation
from rl.learner.network_trainer import variables_of

# Observation bytes the value network reads per call when `row_values`
# evaluates every stored row: above this the rows go through it in blocks, so
# that the observations (rebuilt stacks of pixels) and their activations stay
# bounded. 1024 rows of 84x84x4 Atari frames fit; the vector observations of
# the shipped configs (16 bytes for CartPole: 2M rows) go in one call.
VALUE_BLOCK_BYTES = 32 * 2**20


def block_rows(row_bytes, budget):
  """Rows per block: the largest power of two whose observations fit in `budget` bytes (>= 1)."""
  rows = max(1, budget // max(1, int(row_bytes)))
  return 1 << (rows.bit_length() - 1)


def row_values(data, observation_space, key, state_values):
  """Every stored row's state value, [capacity].

  state_values(obs [B, 1, ...], dist_inputs [B, 1, ...], key) -> [B, 1] is
  the value network held fixed. In one call when the rows' observations fit
  in VALUE_BLOCK_BYTES, else in blocks of rows one after the other (each with
  its own key, folded in from `key`), so that memory stays bounded whatever
  the buffer holds.
  """
  rows = data.rows
  size = data.row_end.shape[0]
  row_bytes = (int(np.prod(observation_space.shape, dtype=np.int64)) *
               observation_space.dtype.itemsize)
  block = block_rows(row_bytes, VALUE_BLOCK_BYTES)
  if size <= block:
    return state_values(slices.observations(data)[:, None],
                        rows['dist_inputs'][:, None], key)[:, 0]

  def block_values(args):
    i, index = args
    return state_values(slices.observations(data, index)[:, None],
                        rows['dist_inputs'][index][:, None], jax.random.fold_in(key, i))[:, 0]
  n_blocks = size // block  # both powers of two
  index = jnp.arange(size).reshape(n_blocks, block)
  return jax.lax.map(block_values, (jnp.arange(n_blocks), index)).reshape(size)


def windowed_advantages(data, values, estimator, margin):
  """Every stored step's advantage, [capacity], from every row's value [capacity].

  The estimator runs on each row's window of the `margin` rows that follow it
  in its trajectory (`slices.windows`): the advantage a slice starting at that
  row would get, computed once for all rows instead of for every batch.
  An estimator with an `every_row` form (GAE) computes the same numbers
  without the [capacity, margin + 1] windows, in log2(margin) vectorised
  passes rather than margin scan steps over every row: on PPO's 64-step
  margin that is 30x faster.
  """
  rows = data.rows
  every_row = getattr(estimator, 'every_row', None)
  if every_row is not None:
    follows = jnp.arange(1, data.row_end.shape[0] + 1) < data.row_end
    return every_row(rows['reward'], values, rows['done'], rows['mask'], follows)
  window = slices.windows(data, {'reward': rows['reward'], 'return_': rows['return_'],
                                 'value': values, 'done': rows['done'],
                                 'mask': rows['mask']}, margin + 1)
  return estimator(window['reward'], window['return_'], window['value'], window['done'],
                   window['mask'])[:, 0]


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
    value_eval_steps: 0 (default): the metrics are those of the training
      batches of the last chunk, computed with the loss; N > 0: they are
      evaluated after each chunk on N fresh batches (the reference's way,
      which compiles a second copy of the loss).
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
  supports_jax_envs = True
  # The value network's summaries (value_loss, value_mean, value_learning_rate, ...).
  summary_dirs = {'value': 'value_'}

  def __init__(self, task, value_model=None, value_optimizer=None, value_lr_schedule=None,
               value_batch_size=64, value_train_steps_per_epoch=500, value_evals_per_epoch=1,
               value_eval_steps=0, n_shared_layers=0, added_policy_slice_length=64,
               n_replay_epochs=1, scale_value_targets=False, q_value=False,
               q_value_aggregate=None, q_value_aggregate_max=None,
               q_value_temperature=1.0, q_value_n_samples=1, advantage_estimator=None,
               advantage_normalization=True, advantage_normalization_epsilon=1e-5,
               advantage_normalization_factor=1.0, **kwargs):
    super().__init__(task, **kwargs)
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
    self.n_replay_epochs = int(n_replay_epochs)
    self._value_model_factory = value_model or models.Value
    self._value_optimizer = value_optimizer
    self._value_lr_schedule = value_lr_schedule
    self._value_batch_size = value_batch_size
    self._value_train_steps = value_train_steps_per_epoch
    self._value_evals = value_evals_per_epoch
    self._value_eval_steps = value_eval_steps

  def build_networks(self):
    super().build_networks()
    task, space = self.task, self.task.action_space
    value_kwargs = {}
    example = (example_observation(task),)
    inputs_fn = None
    if self._q_value:
      value_kwargs = dict(inject_actions=True, is_discrete=self._n_actions is not None,
                          vocab_size=self._n_actions or 2)
      example += (np.zeros((1, 1) + tuple(space.shape), space.dtype),)
      inputs_fn = batches.observation_and_action
    self._value_model = self._value_model_factory(**value_kwargs)
    self._value_trainer = build_trainer(
        task, self._value_model, self._value_optimizer, self._value_lr_schedule,
        self.value_loss, self.draw_value_slices, self.value_batch, 'value_loss', example,
        inputs_fn=inputs_fn,
        seed_offset=1, prepare_fn=self.prepare_value_data,
        after_chunk=lambda target, variables: variables)
    self._trainers['value'] = self._value_trainer

  def networks_initialized(self):
    super().networks_initialized()
    self._check_shared_layers(type(self).__name__)

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

  def value_loss(self, values, batch):
    """(loss, metrics) of the value network's outputs [B, L, 1] on a ValueBatch."""
    loss = losses.value_loss(values[..., 0], batch.target, batch.mask)
    return loss, {'value_loss': loss,
                  'value_mean': losses.masked_mean(values[..., 0] * self._value_scale,
                                                   batch.mask)}

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

  def _state_values(self, variables, obs, dist_inputs, key, mode):
    """V(s) [B, L] from the target network, aggregating Q over actions if q_value."""
    if not self._q_value:
      return self._value_model.apply(variables, obs)[..., 0] * self._value_scale
    actions, log_probs = self._sample_actions(dist_inputs, key)
    q = self._value_model.apply(variables, obs, actions)[..., 0] * self._value_scale
    return q_values_lib.aggregate(q, log_probs, mode, self._q_temperature, self._sample_all)

  def row_advantages(self, data, key, target, mode):
    """Every stored step's state value and advantage under `target`, [capacity] each.

    Computed once per chunk, while the value network they come from is held
    fixed (`row_values`, then `windowed_advantages`).
    """
    values = row_values(
        data, self.task.observation_space, key,
        lambda obs, dist_inputs, k: self._state_values(target, obs, dist_inputs, k, mode))
    return values, windowed_advantages(data, values, self._estimator, self._margin)

  def prepare_value_data(self, data, key, target):
    """(`data` with each row's value target V_target + A (the estimator's return),
    its slices.DrawTable), once per chunk."""
    values, adv = self.row_advantages(data, key, target, self._q_aggregate)
    data = data.replace(rows=dict(data.rows, value_target=(values + adv) / self._value_scale))
    return data, slices.draw_table(data, self._max_slice_length)

  def draw_value_slices(self, data, key):
    """Which rows a value batch holds (data from prepare_value_data)."""
    data, table = data
    return slices.draw(data, key, self._value_batch_size, self._max_slice_length, table=table)

  def value_batch(self, data, fields, key, target, variables):
    """A ValueBatch of max_slice_length steps per slice, from its slices' fields."""
    del data, key, target, variables
    return batches.ValueBatch(fields['observation'], fields['action'],
                              fields['value_target'], fields['mask'])

  # -- policy -------------------------------------------------------------------------

  def policy_data(self):
    return self.task.slice_data([-1] if self.on_policy else None)

  def policy_carry(self, state):
    # The value network the advantages are computed with: as the epoch's
    # value training left it.
    return variables_of(state.nets['value'])

  def policy_rows(self, data, key, target):
    """`data` with each row's advantage under the (just trained) value network."""
    _, adv = self.row_advantages(data, key, target, 'mean')
    return data.replace(rows=dict(data.rows, advantage=adv))

  def policy_batch(self, data, fields, key, target, variables):
    """A PolicyBatch of max_slice_length steps per slice, from its slices' fields."""
    del data, key, target, variables
    return batches.PolicyBatch(fields['observation'], fields['action'], fields['advantage'],
                               fields['dist_inputs'], fields['mask'])

  def policy_loss(self, dist_inputs, batch):
    dist, mask = self._policy_dist, batch.mask
    advantages = batch.advantage
    if self._adv_normalization:
      advantages = losses.normalize_advantages(advantages, mask, self._adv_epsilon,
                                               self._adv_factor)
    log_probs = dist.log_prob(dist_inputs, batch.action)
    old_log_probs = dist.log_prob(batch.dist_inputs, batch.action)
    entropy = dist.entropy(dist_inputs)
    loss, metrics = self.policy_loss_given(log_probs, old_log_probs, advantages, entropy, mask)
    means = losses.masked_means(mask, advantage_mean=batch.advantage, policy_entropy=entropy)
    deviation = batch.advantage - means['advantage_mean']
    return loss, {
        'policy_loss': loss,
        'advantage_std': jnp.sqrt(losses.masked_mean(deviation ** 2, mask)),
        **means,
        **metrics,
    }

  def policy_loss_given(self, log_probs, old_log_probs, advantages, entropy, mask):
    """The algorithm's (loss, extra metrics); subclasses implement it with rl.ops.losses."""
    raise NotImplementedError

  # -- the epoch ----------------------------------------------------------------------

  def _copy_shared(self, state, src, dst):
    """`state` with the first n_shared_layers of network src copied into network dst (pure)."""
    merged = models.copy_shared_layers(variables_of(state.nets[src]),
                                       variables_of(state.nets[dst]), self._n_shared_layers)
    params = merged.pop('params')
    return self.with_net(state, dst, params=params, model_state=merged)

  def epoch_data(self):
    return {'value': self.task.slice_data(), 'policy': self.policy_data()}

  def rollout_data(self, newest, replay, epoch):
    del epoch
    return {'value': replay, 'policy': newest if self.on_policy else replay}

  def update(self, state, data):
    # Both nets get the acting statistics before anything is copied: with the
    # normaliser among the shared layers, the copy below hands the policy's
    # statistics to the value net, so the policy's must be current already.
    state = self.with_acting_statistics(state, 'policy')
    state = self.with_acting_statistics(state, 'value')
    if self._n_shared_layers:
      state = self._copy_shared(state, 'policy', 'value')
    # The targets come from the value net as it was when its chunk started;
    # it is synced after each of the value_evals_per_epoch chunks, so the
    # policy's advantages use the trained value net.
    state, value_result, _ = self.fit(
        state, 'value', data['value'], self._value_train_steps, self._value_evals,
        self._value_eval_steps, carry=variables_of(state.nets['value']))
    if self._n_shared_layers:
      state = self._copy_shared(state, 'value', 'policy')
    state, policy_result = self.train_policy(state, data['policy'])
    return state, {'value': value_result, 'policy': policy_result}, {}


@gin.configurable(denylist=['task', 'output_dir'])
class A2C(ActorCriticTrainer):
  """Advantage actor-critic.

  Args:
    entropy_coeff: weight of the entropy bonus.
    **kwargs: ActorCriticTrainer's arguments.
  """

  on_policy = True

  def __init__(self, task, entropy_coeff=0.01, **kwargs):
    super().__init__(task, **kwargs)
    self._entropy_coeff = entropy_coeff

  def policy_loss_given(self, log_probs, old_log_probs, advantages, entropy, mask):
    del old_log_probs
    return losses.a2c_loss(log_probs, advantages, entropy, mask, self._entropy_coeff), {}


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
    super().__init__(task, **kwargs)
    self._epsilon = epsilon
    self._entropy_coeff = entropy_coeff

  def policy_loss_given(self, log_probs, old_log_probs, advantages, entropy, mask):
    loss = losses.ppo_loss(log_probs, old_log_probs, advantages, entropy, mask,
                           self._epsilon, self._entropy_coeff)
    return loss, losses.ppo_diagnostics(log_probs, old_log_probs, mask, self._epsilon)


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
    super().__init__(task, **kwargs)
    self._beta = beta
    self._w_max = w_max
    self._thresholds = tuple(tuple(t) for t in thresholds) if thresholds else None

  def policy_loss_given(self, log_probs, old_log_probs, advantages, entropy, mask):
    del old_log_probs, entropy
    weights = losses.awr_weights(advantages, mask, self._beta, self._w_max, self._thresholds)
    return losses.awr_loss(log_probs, weights, mask), losses.awr_weight_stats(weights, mask)


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
    **kwargs: ActorCriticTrainer's arguments.
  """

  def __init__(self, task, beta=1.0, w_max=20.0, thresholds=None, reweight=False,
               q_value_n_samples=8, **kwargs):
    kwargs['q_value'] = True
    super().__init__(task, q_value_n_samples=q_value_n_samples, **kwargs)
    self._beta = beta
    self._w_max = w_max
    self._thresholds = tuple(tuple(t) for t in thresholds) if thresholds else None
    self._reweight = reweight

  def policy_rows(self, data, key, target):
    # The policy weighs sampled actions by their Q; no per-row advantages.
    del key, target
    return data

  def draw_policy_slices(self, data, key):
    # The batch key's first half draws the slices, its second the actions.
    slice_key, _ = jax.random.split(key)
    return super().draw_policy_slices(data, slice_key)

  def policy_batch(self, data, fields, key, target, variables):
    """A SampledQBatch: n actions per state from the stored policy, scored by Q_target."""
    del data, variables
    _, sample_key = jax.random.split(key)
    actions, log_probs = self._sample_actions(fields['dist_inputs'], sample_key)
    q = self._value_model.apply(target, fields['observation'], actions)[..., 0]
    q = q * self._value_scale
    mask = jnp.broadcast_to(fields['mask'][:, None], q.shape)
    return batches.SampledQBatch(fields['observation'], actions, q, log_probs, mask)

  def policy_loss(self, dist_inputs, batch):
    dist, q, mask = self._policy_dist, batch.q_value, batch.mask
    tiled = jnp.broadcast_to(dist_inputs[:, None], q.shape + dist_inputs.shape[2:])
    log_probs = dist.log_prob(tiled, batch.action)
    values = q_values_lib.aggregate(q, batch.log_prob, 'mean', sample_all=self._sample_all)
    raw = q - values[:, None]
    adv = raw
    if self._adv_normalization:
      adv = losses.normalize_advantages(adv, mask, self._adv_epsilon, self._adv_factor)
    weights = losses.awr_weights(adv, mask, self._beta, self._w_max, self._thresholds)
    weighted = mask
    if self._reweight:
      weighted = weighted * jnp.exp(jax.lax.stop_gradient(log_probs) - batch.log_prob)
    if self._sample_all:
      # Enumerated actions are weighted by how likely the behaviour policy was to take them.
      weighted = weighted * jnp.exp(batch.log_prob)
    loss = losses.awr_loss(log_probs, weights, weighted)
    mean = losses.masked_mean(raw, mask)
    return loss, {
        'policy_loss': loss,
        'advantage_mean': mean,
        'advantage_std': jnp.sqrt(losses.masked_mean((raw - mean) ** 2, mask)),
        **losses.awr_weight_stats(weights, mask),
    }
