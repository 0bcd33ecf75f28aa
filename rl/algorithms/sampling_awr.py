"""SamplingAWR: advantage-weighted regression on the Q-values of sampled actions (QWR).

The value network is Q(s, a), trained as ActorCriticTrainer trains it. For
every state of a policy batch, n actions are sampled from the stored
behaviour policy and scored by the Q network; each sample's advantage is its
Q minus the mean Q of its state's samples, and the policy regresses on the
samples weighted by exp(A / beta).
"""
import jax
import jax.numpy as jnp

from rl.algorithms import batches
from rl.algorithms.actor_critic import ActorCriticTrainer
from rl.configurables import configurable
from rl.data import slices
from rl.learner.fused_epoch import variables_of
from rl.ops import losses
from rl.ops import q_values as q_values_lib
from rl.ops.advantages import masked_mean
from rl.ops.advantages import normalize_advantages


@configurable(denylist=['task', 'output_dir'])
class SamplingAWR(ActorCriticTrainer):
  """AWR on Q-values of actions sampled per state; q_value is always on.

  Args:
    beta: temperature of the exponentiated advantages.
    w_max: cap on the weights.
    thresholds: optional ((percentile, weight, minimum), ...) step weights.
    reweight: importance-weight each sampled action by pi_new / pi_old.
    q_value_n_samples: actions sampled per state (as in ActorCriticTrainer).
      One sample would make every advantage 0 (the policy would only imitate
      itself); 8 estimates the mean for discrete and continuous actions alike.
    **kwargs: ActorCriticTrainer's arguments.
  """

  fixed_parameters = ('q_value',)

  def __init__(self, task, beta=1.0, w_max=20.0, thresholds=None, reweight=False,
               q_value_n_samples=8, **kwargs):
    kwargs['q_value'] = True
    self.beta = beta
    self.w_max = w_max
    self.thresholds = tuple(tuple(t) for t in thresholds) if thresholds else None
    self.reweight = reweight
    super().__init__(task, q_value_n_samples=q_value_n_samples, **kwargs)

  def policy_advantages(self, nets, data, key):
    # The policy weighs sampled actions by their Q; no per-row advantages.
    del nets, key
    return data, slices.draw_table(data, self.max_slice_length)

  def draw_policy(self, data, key):
    # The batch key's first half draws the slices, its second the actions.
    slice_key, _ = jax.random.split(key)
    return super().draw_policy(data, slice_key)

  def policy_batch(self, nets, rows, key):
    """A SampledQBatch: n actions per state from the stored policy, scored by Q."""
    _, sample_key = jax.random.split(key)
    actions, log_probs = self.q_baseline.sample_actions(rows['dist_inputs'], sample_key)
    q = self.value_net.model.apply(variables_of(nets['value']), rows['observation'], actions)
    q = q[..., 0] * self.value_scale
    mask = jnp.broadcast_to(rows['mask'][:, None], q.shape)
    return batches.SampledQBatch(rows['observation'], actions, q, log_probs, mask)

  def policy_loss(self, variables, batch, extra):
    del extra
    dist_inputs = self.policy_net.model.apply(variables, batch.observation)
    dist, q, mask = self.dist, batch.q_value, batch.mask
    sample_all = self.q_baseline.sample_all
    tiled = jnp.broadcast_to(dist_inputs[:, None], q.shape + dist_inputs.shape[2:])
    log_probs = dist.log_prob(tiled, batch.action)
    values = q_values_lib.aggregate(q, batch.log_prob, 'mean', sample_all=sample_all)
    raw = q - values[:, None]
    adv = raw
    if self.normalization is not None:
      adv = normalize_advantages(adv, mask, *self.normalization)
    weights = losses.awr_weights(adv, mask, self.beta, self.w_max, self.thresholds)
    weighted = mask
    if self.reweight:
      weighted = weighted * jnp.exp(jax.lax.stop_gradient(log_probs) - batch.log_prob)
    if sample_all:
      # Enumerated actions are weighted by how likely the behaviour policy was to take them.
      weighted = weighted * jnp.exp(batch.log_prob)
    loss = losses.awr_loss(log_probs, weights, weighted)
    mean = masked_mean(raw, mask)
    return loss, {
        'policy_loss': loss,
        'advantage_mean': mean,
        'advantage_std': jnp.sqrt(masked_mean((raw - mean) ** 2, mask)),
        **losses.awr_weight_stats(weights, mask),
    }
