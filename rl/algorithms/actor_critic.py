"""Actor-critics with separate policy and value networks: A2C, PPO and AWR.

An epoch trains the value network, then the policy. Value targets are
V_target(s_t) + A_t, the advantage estimator's return computed with the
target network (the value net as its chunk started, synced after each of the
value_evals_per_epoch chunks), so the value net regresses on TD / GAE / MC
returns. The policy then trains on advantages from the just-trained value
network. Values and advantages are computed for every stored step once per
chunk (rl.algorithms.row_advantages), and batches gather them.

A2C, PPO and AWR differ only in `policy_loss_given`, the loss they apply to
(log pi_new, log pi_old, normalised advantages). SamplingAWR
(rl.algorithms.sampling_awr) trains the policy on Q-values of sampled actions.
"""
import gin
import jax.numpy as jnp
import numpy as np

from rl.algorithms import batches
from rl.algorithms import networks
from rl.algorithms.policy_network import PolicyNetwork
from rl.algorithms.q_baseline import QBaseline
from rl.algorithms.q_baseline import parse_aggregate
from rl.algorithms.row_advantages import row_values
from rl.algorithms.row_advantages import windowed_advantages
from rl.data import slices
from rl.errors import ConfigError
from rl.learner.acting import Acting
from rl.learner.checks import check_divisible
from rl.learner.checks import check_estimator_margin
from rl.learner.checks import check_on_policy
from rl.learner.checks import check_whole_episodes
from rl.learner.fused_epoch import variables_of
from rl.learner.state import with_acting_statistics
from rl.learner.state import with_net
from rl.learner.trainer import RLTrainer
from rl.nets import heads
from rl.nets.variables import copy_shared_layers
from rl.nets.variables import top_level_layers
from rl.ops import advantages as advantages_lib
from rl.ops import losses


class ActorCriticTrainer(RLTrainer):
  """Policy and value networks trained in turn on the task's trajectories.

  Args:
    task: the RLTask.
    value_model: value model factory (gin: @Value); None: @Value.
    value_optimizer: optimizer factory of the value network (gin: @Adam,
      @RMSProp, @SGD); None: @Adam.
    value_lr_schedule: learning-rate schedule factory of the value network
      (e.g. a scoped @value/multifactor); None: @multifactor.
    value_batch_size: slices per value batch.
    value_train_steps_per_epoch: value gradient steps per epoch.
    value_evals_per_epoch: the value steps run in this many chunks; the target
      network is re-synced after each chunk.
    value_eval_steps: 0: the metrics are those of the last chunk's training
      batches; N > 0: of N fresh batches after each chunk (the reference's way).
    n_shared_layers: the first n top-level layers (normaliser, body, ...) are
      copied policy -> value before value training and back after it.
    added_policy_slice_length: steps after each trained position that the
      advantage estimator bootstraps through (its margin); bootstrapping
      estimators (the default @gae among them) need >= 1. 64 lets GAE with
      lambda 0.95 and gamma 0.99 see all but 2% of its weight.
    n_replay_epochs: epochs of data the buffer keeps and the trainers sample;
      on-policy trainers (A2C, PPO) need 1.
    scale_value_targets: train the value net on targets * (1 - gamma), so its
      outputs stay O(reward) whatever the horizon.
    q_value: train a Q(s, a) network instead of V(s) (rl.algorithms.q_baseline).
    q_value_aggregate: how V(s) is made of the sampled Q(s, a): 'mean',
      'max', 'softmax' or 'logsumexp'; None: 'logsumexp'.
    q_value_aggregate_max: the reference's boolean alias (True = 'max', False = 'mean').
    q_value_temperature: temperature of 'softmax' and 'logsumexp'.
    q_value_n_samples: actions sampled per state; the number of discrete
      actions (or 'all') enumerates every action.
    advantage_estimator: gin factory (@gae, @td_lambda, @td_k, @monte_carlo);
      None: @gae.
    advantage_normalization: normalise advantages over the real steps of each
      batch before the policy loss.
    advantage_normalization_epsilon: added to the std when normalising.
    advantage_normalization_factor: multiplies the normalised advantages.
    policy_model: policy model factory (gin: @Policy), called with the
      action distribution; None: @Policy.
    policy_optimizer: optimizer factory of the policy network (gin: @Adam,
      @RMSProp, @SGD); None: @Adam.
    policy_lr_schedule: learning-rate schedule factory of the policy network
      (e.g. a scoped @policy/multifactor); None: @multifactor.
    policy_batch_size: slices per policy batch.
    policy_train_steps_per_epoch: policy gradient steps per epoch.
    policy_evals_per_epoch: the policy steps run in this many chunks, with
      the metrics after each; the last chunk's are reported.
    policy_eval_steps: 0: the policy metrics are those of the last chunk's
      training batches; N > 0: of N fresh batches after each chunk.
    max_slice_length: trained steps per slice, for both networks.
    **kwargs: RLTrainer's arguments (n_trajectories_per_epoch,
      n_interactions_per_epoch, n_eval_episodes, eval_temperatures,
      eval_every, only_eval, output_dir, collect_per_epoch).
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
               advantage_normalization_factor=1.0, policy_model=None, policy_optimizer=None,
               policy_lr_schedule=None, policy_batch_size=64,
               policy_train_steps_per_epoch=500, policy_evals_per_epoch=1,
               policy_eval_steps=0, max_slice_length=1, **kwargs):
    super().__init__(task, **kwargs)
    name = type(self).__name__
    self.policy = PolicyNetwork(task, name, policy_model, policy_optimizer, policy_lr_schedule,
                                policy_batch_size, policy_train_steps_per_epoch,
                                policy_evals_per_epoch, policy_eval_steps, max_slice_length)
    check_on_policy(self, n_replay_epochs, 'AWR or SamplingAWR')
    check_divisible(value_train_steps_per_epoch, value_evals_per_epoch,
                    'value_train_steps_per_epoch', 'value_evals_per_epoch')
    q_value_aggregate = parse_aggregate(name, q_value_aggregate, q_value_aggregate_max)
    advantage_estimator = advantage_estimator or advantages_lib.gae
    check_estimator_margin(self, advantage_estimator, added_policy_slice_length)
    if advantage_estimator is advantages_lib.monte_carlo:
      check_whole_episodes(self, task, kwargs, 'use a bootstrapping estimator (@gae with '
                           'added_policy_slice_length >= 1)')
    self.q_baseline = (QBaseline(name, task, self.policy.dist, q_value_aggregate,
                                 q_value_temperature, q_value_n_samples) if q_value else None)
    self._max_slice_length = max_slice_length
    self._margin = int(added_policy_slice_length)
    self._n_shared_layers = int(n_shared_layers)
    self.n_replay_epochs = int(n_replay_epochs)
    self._adv_normalization = advantage_normalization
    self._adv_epsilon = advantage_normalization_epsilon
    self._adv_factor = advantage_normalization_factor
    self._value_scale = 1.0 / (1.0 - task.gamma) if scale_value_targets else 1.0
    self._estimator = advantage_estimator(gamma=task.gamma, margin=self._margin)
    self._value_model_factory = value_model or heads.Value
    self._value_optimizer = value_optimizer
    self._value_lr_schedule = value_lr_schedule
    self._value_batch_size = value_batch_size
    self._value_train_steps = value_train_steps_per_epoch
    self._value_evals = value_evals_per_epoch
    self._value_eval_steps = value_eval_steps
    self.build()


  def build_networks(self):
    task, space = self.task, self.task.action_space
    policy = self.policy.build(self.policy_loss, self.policy_batch, rows_fn=self.policy_rows,
                               draw_fn=self.draw_policy_slices)
    value_kwargs, inputs_fn = {}, None
    example = (networks.example_observation(task),)
    if self.q_baseline is not None:
      n_actions = self.q_baseline.n_actions
      value_kwargs = dict(inject_actions=True, is_discrete=n_actions is not None,
                          vocab_size=n_actions or 2)
      example += (np.zeros((1, 1) + tuple(space.shape), space.dtype),)
      inputs_fn = batches.observation_and_action
    self._value_model = self._value_model_factory(**value_kwargs)
    # The carry of the value epoch is the target network: the value net as its
    # chunk started, synced after every chunk.
    value = networks.build_network(
        task, self._value_model, self._value_optimizer, self._value_lr_schedule,
        self.value_loss, self.draw_value_slices, self.value_batch, 'value_loss', example,
        inputs_fn=inputs_fn, seed_offset=1, prepare_fn=self.prepare_value_data,
        after_chunk=lambda target, variables: variables)
    return {'policy': policy, 'value': value}, Acting('policy', self.policy.dist)

  def initial_extra(self, nets):
    """Checks that n_shared_layers names layers both networks have, in the same order."""
    policy = top_level_layers(nets['policy'].variables)
    value = top_level_layers(nets['value'].variables)
    common = 0
    while common < min(len(policy), len(value)) and policy[common] == value[common]:
      common += 1
    if not 0 <= self._n_shared_layers <= common:
      raise ConfigError(
          f'{type(self).__name__}.n_shared_layers must be between 0 and {common}: the policy '
          f'layers {policy} and the value layers {value} share their first {common}.')
    return {}

  # -- the value network -------------------------------------------------------------

  def _state_values(self, variables, obs, dist_inputs, key, mode):
    """V(s) [B, L] from the target network, aggregating Q over actions if q_value."""
    scale = self._value_scale
    if self.q_baseline is None:
      return self._value_model.apply(variables, obs)[..., 0] * scale
    return self.q_baseline.state_values(
        lambda actions: self._value_model.apply(variables, obs, actions)[..., 0] * scale,
        dist_inputs, key, mode)

  def row_advantages(self, data, key, target, mode):
    """Every stored step's state value and advantage under `target`, [capacity] each."""
    values = row_values(
        data, self.task.observation_space, key,
        lambda obs, dist_inputs, k: self._state_values(target, obs, dist_inputs, k, mode))
    return values, windowed_advantages(data, values, self._estimator, self._margin)

  def prepare_value_data(self, data, key, target):
    """(`data` with each row's value target V_target + A, its slices.DrawTable), per chunk."""
    aggregate = self.q_baseline.aggregate if self.q_baseline is not None else None
    values, adv = self.row_advantages(data, key, target, aggregate)
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

  def value_loss(self, values, batch):
    """(loss, metrics) of the value network's outputs [B, L, 1] on a ValueBatch."""
    loss = losses.value_loss(values[..., 0], batch.target, batch.mask)
    return loss, {'value_loss': loss,
                  'value_mean': losses.masked_mean(values[..., 0] * self._value_scale,
                                                   batch.mask)}

  # -- the policy --------------------------------------------------------------------

  def policy_rows(self, data, key, target):
    """`data` with each row's advantage under the (just trained) value network."""
    _, adv = self.row_advantages(data, key, target, 'mean')
    return data.replace(rows=dict(data.rows, advantage=adv))

  def draw_policy_slices(self, data, key):
    return self.policy.draw(data, key)

  def policy_batch(self, data, fields, key, target, variables):
    """A PolicyBatch of max_slice_length steps per slice, from its slices' fields."""
    del data, key, target, variables
    return batches.PolicyBatch(fields['observation'], fields['action'], fields['advantage'],
                               fields['dist_inputs'], fields['mask'])

  def policy_loss(self, dist_inputs, batch):
    dist, mask = self.policy.dist, batch.mask
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
    """The variant's (loss, extra metrics), from rl.ops.losses."""
    raise NotImplementedError(f'{type(self).__name__} gives no policy_loss_given')

  # -- the epoch ---------------------------------------------------------------------

  def _copy_shared(self, state, src, dst):
    """`state` with the first n_shared_layers of network src copied into network dst (pure)."""
    merged = copy_shared_layers(variables_of(state.nets[src]), variables_of(state.nets[dst]),
                                self._n_shared_layers)
    params = merged.pop('params')
    return with_net(state, dst, params=params, model_state=merged)

  def epoch_data(self, epoch):
    del epoch
    return {'value': self.task.slice_data(),
            'policy': self.task.slice_data([-1] if self.on_policy else None)}

  def rollout_data(self, newest, replay, epoch):
    del epoch
    return {'value': replay, 'policy': newest if self.on_policy else replay}

  def update(self, state, data):
    # Both nets get the acting statistics before anything is copied: with the
    # normaliser among the shared layers, the copy below hands the policy's
    # statistics to the value net, so the policy's must be current already.
    state = with_acting_statistics(state, 'policy')
    state = with_acting_statistics(state, 'value')
    if self._n_shared_layers:
      state = self._copy_shared(state, 'policy', 'value')
    state, value_result, _ = self.fit(
        state, 'value', data['value'], self._value_train_steps,
        self._value_evals, self._value_eval_steps, carry=variables_of(state.nets['value']))
    if self._n_shared_layers:
      state = self._copy_shared(state, 'value', 'policy')
    # The policy's advantages come from the value network as its training left it.
    state, policy_result = self.policy.train(self.fit, state, data['policy'],
                                             carry=variables_of(state.nets['value']))
    return state, {'value': value_result, 'policy': policy_result}, {}


@gin.configurable(denylist=['task', 'output_dir'])
class A2C(ActorCriticTrainer):
  """Advantage actor-critic (Mnih et al., 2016).

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
    return losses.a2c_loss(log_probs, advantages, entropy, mask, self._entropy_coeff), {}


@gin.configurable(denylist=['task', 'output_dir'])
class PPO(ActorCriticTrainer):
  """Proximal policy optimisation with the clipped surrogate (Schulman et al., 2017).

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
    loss = losses.ppo_loss(log_probs, old_log_probs, advantages, entropy, mask,
                           self._epsilon, self._entropy_coeff)
    return loss, losses.ppo_diagnostics(log_probs, old_log_probs, mask, self._epsilon)


@gin.configurable(denylist=['task', 'output_dir'])
class AWR(ActorCriticTrainer):
  """Advantage-weighted regression (Peng et al., 2019); off-policy: replays n_replay_epochs.

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
    return losses.awr_loss(log_probs, weights, mask), losses.awr_weight_stats(weights, mask)
