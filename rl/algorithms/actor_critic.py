"""Actor-critics with separate policy and value networks: the update A2C, PPO and AWR share.

An epoch trains the value network, then the policy (`ActorCriticTrainer.update`):

  1. The value network regresses on V_target(s_t) + A_t, the advantage
     estimator's return computed with the target network: the value net as
     its chunk starts (value_evals_per_epoch chunks), so it regresses on TD,
     GAE or Monte-Carlo returns.
  2. The policy trains on the advantages of the just-trained value network,
     through its variant's objective (ppo.py, a2c.py, awr.py; sampling_awr.py
     trains on Q-values of sampled actions instead).

Values and advantages are computed for every stored step once per chunk
(rl.data.slices.row_values and row_advantages), and each batch gathers them.
"""
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from rl import ranges
from rl.algorithms import batches
from rl.algorithms import networks
from rl.algorithms.q_baseline import QBaseline
from rl.algorithms.q_baseline import parse_aggregate
from rl.data import slices
from rl.errors import ConfigError
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
from rl.nets.variables import copy_shared_layers
from rl.nets.variables import top_level_layers
from rl.ops import advantages as advantages_lib
from rl.ops.advantages import masked_mean
from rl.ops.advantages import masked_means
from rl.ops.advantages import normalize_advantages


class PolicyTerms(NamedTuple):
  """What a policy objective needs of a batch, [B, L] each."""
  log_probs: jax.Array  # log pi(a|s) under the policy being trained
  old_log_probs: jax.Array  # under the policy that acted
  advantages: jax.Array  # normalised (if advantage_normalization)
  entropy: jax.Array  # of the trained policy at each state
  mask: jax.Array  # 1 on real steps


def value_loss(values, batch, value_scale):
  """(loss, metrics) of a value network's outputs [B, L, 1] regressing on a ValueBatch."""
  loss = masked_mean((values[..., 0] - batch.target) ** 2, batch.mask)
  return loss, {'value_loss': loss, 'value_mean': masked_mean(values[..., 0] * value_scale,
                                                              batch.mask)}


def policy_loss(objective, dist, dist_inputs, batch, normalization, extra):
  """(loss, metrics) of the policy's dist_inputs on a PolicyBatch under `objective`.

  objective(PolicyTerms, extra) -> (loss, metrics) is the variant's;
  normalization is (epsilon, factor), or None to leave the advantages as they are.
  """
  mask, advantages = batch.mask, batch.advantage
  if normalization is not None:
    advantages = normalize_advantages(advantages, mask, *normalization)
  log_probs = dist.log_prob(dist_inputs, batch.action)
  old_log_probs = dist.log_prob(batch.dist_inputs, batch.action)
  entropy = dist.entropy(dist_inputs)
  loss, metrics = objective(PolicyTerms(log_probs, old_log_probs, advantages, entropy, mask),
                            extra)
  means = masked_means(mask, advantage_mean=batch.advantage, policy_entropy=entropy)
  deviation = batch.advantage - means['advantage_mean']
  return loss, {
      'policy_loss': loss,
      'advantage_std': jnp.sqrt(masked_mean(deviation ** 2, mask)),
      **means,
      **metrics,
  }


class ActorCriticTrainer(RLTrainer):
  """Policy and value networks trained in turn on the task's trajectories.

  A variant gives `objective(terms, extra) -> (loss, metrics)`, its policy
  loss on PolicyTerms; `extra` is the TrainState's per-epoch values
  (`initial_extra`), passed as an argument so that the loss stays pure.

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
    check_divisible(policy_train_steps_per_epoch, policy_evals_per_epoch,
                    'policy_train_steps_per_epoch', 'policy_evals_per_epoch')
    self.dist = networks.policy_distribution(task, name)
    check_on_policy(self, n_replay_epochs, 'AWR or SamplingAWR')
    check_divisible(value_train_steps_per_epoch, value_evals_per_epoch,
                    'value_train_steps_per_epoch', 'value_evals_per_epoch')
    q_value_aggregate = parse_aggregate(name, q_value_aggregate, q_value_aggregate_max)
    self.margin = int(added_policy_slice_length)
    self.estimator = (advantage_estimator or advantages_lib.gae)(gamma=task.gamma,
                                                                  margin=self.margin)
    check_estimator(self, self.estimator,
                    f'added_policy_slice_length must be >= 1 (got {self.margin})', task, kwargs,
                    'use a bootstrapping estimator (@gae with added_policy_slice_length >= 1)')
    check_batch_size(self, 'policy_batch_size', policy_batch_size, n_replay_epochs)
    ranges.in_range(f'{name}.value_batch_size', value_batch_size, low=1)
    self.q_baseline = (QBaseline(name, task, self.dist, q_value_aggregate,
                                 q_value_temperature, q_value_n_samples) if q_value else None)
    self.max_slice_length = max_slice_length
    self.n_shared_layers = int(n_shared_layers)
    self.n_replay_epochs = int(n_replay_epochs)
    self.normalization = ((advantage_normalization_epsilon, advantage_normalization_factor)
                          if advantage_normalization else None)
    self.value_scale = value_scale_of(self, task, scale_value_targets)
    self.value_batch_size = value_batch_size
    self.value_train_steps = value_train_steps_per_epoch
    self.value_evals = value_evals_per_epoch
    self.value_eval_steps = value_eval_steps
    self.policy_batch_size = policy_batch_size
    self.policy_train_steps = policy_train_steps_per_epoch
    self.policy_evals = policy_evals_per_epoch
    self.policy_eval_steps = policy_eval_steps
    self._models = (policy_model or heads.Policy, value_model or heads.Value)
    self._optimizers = (policy_optimizer, policy_lr_schedule, value_optimizer, value_lr_schedule)
    self.policy_net = self.value_net = None

  def build_networks(self):
    task, space = self.task, self.task.action_space
    policy_model, value_model = self._models
    policy_optimizer, policy_schedule, value_optimizer, value_schedule = self._optimizers
    self.policy_net = networks.build_network(
        task, policy_model(policy_distribution=self.dist), policy_optimizer, policy_schedule,
        'policy_loss', (networks.example_observation(task),))
    value_kwargs = {}
    example = (networks.example_observation(task),)
    if self.q_baseline is not None:
      n_actions = self.q_baseline.n_actions
      value_kwargs = dict(inject_actions=True, is_discrete=n_actions is not None,
                          vocab_size=n_actions or 2)
      example += (np.zeros((1, 1) + tuple(space.shape), space.dtype),)
    self.value_net = networks.build_network(
        task, value_model(**value_kwargs), value_optimizer, value_schedule, 'value_loss',
        example, seed_offset=1)
    return {'policy': self.policy_net, 'value': self.value_net}, Acting('policy', self.dist)

  def initial_extra(self, nets):
    """Checks that n_shared_layers names layers both networks have, in the same order."""
    policy = top_level_layers(nets['policy'].variables)
    value = top_level_layers(nets['value'].variables)
    common = 0
    while common < min(len(policy), len(value)) and policy[common] == value[common]:
      common += 1
    if not 0 <= self.n_shared_layers <= common:
      raise ConfigError(
          f'{type(self).__name__}.n_shared_layers must be between 0 and {common}: the policy '
          f'layers {policy} and the value layers {value} share their first {common}.')
    return {}

  def epoch_data(self, epoch):
    del epoch
    return {'value': self.task.slice_data(),
            'policy': self.task.slice_data([-1] if self.on_policy else None)}

  def rollout_data(self, newest, replay, epoch):
    del epoch
    return {'value': replay, 'policy': newest if self.on_policy else replay}

  # -- the epoch ---------------------------------------------------------------------

  def update(self, state, data):
    nets = self.shared_layers(state.nets, 'policy', 'value')
    # 1. The value network, on targets from itself as each chunk starts.
    value_step, value_metrics = one_network_step(
        self.value_net.tx, 'value', self.value_loss, lambda nets, rows, key: self.value_batch(rows))
    nets, key, value = fused_epoch(
        value_step, nets, data['value'], state.train_key, draw=self.draw_value,
        take=slices.take_slices, prepare=self.value_targets, evaluate=value_metrics,
        n_chunks=self.value_evals, steps_per_chunk=self.value_train_steps // self.value_evals,
        n_eval_steps=self.value_eval_steps, batch_sharding=self.value_net.batch_sharding)
    nets = self.shared_layers(nets, 'value', 'policy')
    # 2. The policy, on advantages from the value network as its training left it.
    policy_step, policy_metrics = one_network_step(
        self.policy_net.tx, 'policy', self.policy_loss, self.policy_batch, state.extra)
    nets, key, policy = fused_epoch(
        policy_step, nets, data['policy'], key, draw=self.draw_policy,
        take=slices.take_slices, prepare=self.policy_advantages, evaluate=policy_metrics,
        n_chunks=self.policy_evals, steps_per_chunk=self.policy_train_steps // self.policy_evals,
        n_eval_steps=self.policy_eval_steps, batch_sharding=self.policy_net.batch_sharding)
    return state._replace(nets=nets, train_key=key), {**value, **policy}, {}

  def shared_layers(self, nets, src, dst):
    """`nets` with the first n_shared_layers of network src copied into network dst (pure)."""
    if not self.n_shared_layers:
      return nets
    merged = copy_shared_layers(variables_of(nets[src]), variables_of(nets[dst]),
                                self.n_shared_layers)
    params = merged.pop('params')
    return {**nets, dst: dict(nets[dst], params=params, model_state=merged)}

  # -- the value network -------------------------------------------------------------

  def state_values(self, value, obs, dist_inputs, key, mode):
    """V(s) [B, L] under the value network's state `value`, aggregating Q if q_value."""
    model, variables, scale = self.value_net.model, variables_of(value), self.value_scale
    if self.q_baseline is None:
      return model.apply(variables, obs)[..., 0] * scale
    return self.q_baseline.state_values(
        lambda actions: model.apply(variables, obs, actions)[..., 0] * scale,
        dist_inputs, key, mode)

  def row_advantages(self, value, data, key, mode):
    """Every stored step's state value and advantage under `value`, [capacity] each."""
    values = slices.row_values(
        data, self.task.observation_space, key,
        lambda obs, dist_inputs, k: self.state_values(value, obs, dist_inputs, k, mode))
    return values, slices.row_advantages(data, values, self.estimator)

  def value_targets(self, nets, data, key):
    """(`data` with each row's value target V + A under `nets`' value network, its
    slices.DrawTable), at the start of every value chunk."""
    aggregate = self.q_baseline.aggregate if self.q_baseline is not None else None
    values, adv = self.row_advantages(nets['value'], data, key, aggregate)
    data = data.replace(rows=dict(data.rows, value_target=(values + adv) / self.value_scale))
    return data, slices.draw_table(data, self.max_slice_length)

  def draw_value(self, data, key):
    """Which rows a value batch holds (`data` from value_targets)."""
    data, table = data
    return slices.draw(data, key, self.value_batch_size, self.max_slice_length, table=table)

  def value_batch(self, rows):
    return batches.ValueBatch(rows['observation'], rows['action'], rows['value_target'],
                              rows['mask'])

  def value_loss(self, variables, batch):
    inputs = (batch.observation,) if self.q_baseline is None else (batch.observation,
                                                                   batch.action)
    return value_loss(self.value_net.model.apply(variables, *inputs), batch, self.value_scale)

  # -- the policy --------------------------------------------------------------------

  def policy_advantages(self, nets, data, key):
    """(`data` with each row's advantage under the value network, its slices.DrawTable),
    at the start of every policy chunk."""
    _, adv = self.row_advantages(nets['value'], data, key, 'mean')
    data = data.replace(rows=dict(data.rows, advantage=adv))
    return data, slices.draw_table(data, self.max_slice_length)

  def draw_policy(self, data, key):
    """Which rows a policy batch holds (`data` from policy_advantages)."""
    data, table = data
    return slices.draw(data, key, self.policy_batch_size, self.max_slice_length, table=table)

  def policy_batch(self, nets, rows, key):
    del nets, key
    return batches.PolicyBatch(rows['observation'], rows['action'], rows['advantage'],
                               rows['dist_inputs'], rows['mask'])

  def policy_loss(self, variables, batch, extra):
    dist_inputs = self.policy_net.model.apply(variables, batch.observation)
    return policy_loss(self.objective, self.dist, dist_inputs, batch, self.normalization, extra)

  def objective(self, terms, extra):
    """The variant's (policy loss, extra metrics) of PolicyTerms."""
    raise NotImplementedError(f'{type(self).__name__} gives no objective')
