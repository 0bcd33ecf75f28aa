"""SamplingAWR: advantage-weighted regression on the Q-values of sampled actions (QWR).

The value network is Q(s, a). For every state of a policy batch, n actions
are sampled from the stored behaviour policy and scored by the target Q
network; each sample's advantage is its Q minus the mean Q of its state's
samples, and the policy regresses on the samples weighted by exp(A / beta).
"""
import gin
import jax
import jax.numpy as jnp

from rl.algorithms import batches
from rl.algorithms.actor_critic import ActorCriticTrainer
from rl.ops import losses
from rl.ops import q_values as q_values_lib


@gin.configurable(denylist=['task', 'output_dir'])
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

  def __init__(self, task, beta=1.0, w_max=20.0, thresholds=None, reweight=False,
               q_value_n_samples=8, **kwargs):
    kwargs['q_value'] = True
    self._beta = beta
    self._w_max = w_max
    self._thresholds = tuple(tuple(t) for t in thresholds) if thresholds else None
    self._reweight = reweight
    super().__init__(task, q_value_n_samples=q_value_n_samples, **kwargs)

  def policy_rows(self, data, key, target):
    # The policy weighs sampled actions by their Q; no per-row advantages.
    del key, target
    return data

  def draw_policy_slices(self, data, key):
    # The batch key's first half draws the slices, its second the actions.
    slice_key, _ = jax.random.split(key)
    return self.policy.draw(data, slice_key)

  def policy_batch(self, data, fields, key, target, variables):
    """A SampledQBatch: n actions per state from the stored policy, scored by Q_target."""
    del data, variables
    _, sample_key = jax.random.split(key)
    actions, log_probs = self.q_baseline.sample_actions(fields['dist_inputs'], sample_key)
    q = self._value_model.apply(target, fields['observation'], actions)[..., 0]
    q = q * self._value_scale
    mask = jnp.broadcast_to(fields['mask'][:, None], q.shape)
    return batches.SampledQBatch(fields['observation'], actions, q, log_probs, mask)

  def policy_loss(self, dist_inputs, batch):
    dist, q, mask = self.policy.dist, batch.q_value, batch.mask
    sample_all = self.q_baseline.sample_all
    tiled = jnp.broadcast_to(dist_inputs[:, None], q.shape + dist_inputs.shape[2:])
    log_probs = dist.log_prob(tiled, batch.action)
    values = q_values_lib.aggregate(q, batch.log_prob, 'mean', sample_all=sample_all)
    raw = q - values[:, None]
    adv = raw
    if self._adv_normalization:
      adv = losses.normalize_advantages(adv, mask, self._adv_epsilon, self._adv_factor)
    weights = losses.awr_weights(adv, mask, self._beta, self._w_max, self._thresholds)
    weighted = mask
    if self._reweight:
      weighted = weighted * jnp.exp(jax.lax.stop_gradient(log_probs) - batch.log_prob)
    if sample_all:
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
