"""Every algorithm's loss as a pure function of arrays.

Inputs are [B, L] arrays with a mask (1 = real step); padding never counts:
sums are divided by the number of real steps, and batch statistics (advantage
normalisation) use real steps only. Trainers turn model outputs into log
probabilities with their distribution and call these; the separate and joint
actor-critic trainers share them. The masked statistics they build on
(masked_mean, normalize) are in rl.ops.advantages.
"""
import jax
import jax.numpy as jnp

from rl.ops.advantages import masked_mean
from rl.ops.advantages import normalize


def reinforce_loss(log_probs, returns, mask):
  """REINFORCE: -E[log pi(a|s) * normalised return].

  The returns are normalised over the real steps of the batch (mean 0,
  std 1), a baseline that keeps the gradient's scale steady as returns grow.
  The weights carry no gradient: only log pi is differentiated.
  """
  weights = jax.lax.stop_gradient(normalize(returns, mask))
  return -masked_mean(log_probs * weights, mask)


def a2c_loss(log_probs, advantages, entropy, mask, entropy_coeff):
  """Advantage actor-critic: -E[log pi(a|s) A] - c_H E[H(pi(.|s))].

  The entropy is the policy distribution's entropy at each state (computed
  from its parameters), which keeps exploration from collapsing early.
  """
  advantages = jax.lax.stop_gradient(advantages)
  return -masked_mean(log_probs * advantages, mask) - entropy_coeff * masked_mean(entropy, mask)


def awr_weights(advantages, mask, beta, w_max, thresholds=None):
  """AWR weights: min(exp(A / beta), w_max); or, with thresholds, step weights.

  thresholds: a tuple of (percentile, weight, minimum): every real step whose
  advantage is at least max(minimum, percentile-th percentile of A) gets
  `weight` added. The percentiles are taken over the real steps only (mask
  1): padded rows hold whatever the batch was padded with, and letting them
  in would move the cut with the amount of padding. Padding gets weight 0.
  """
  advantages = jnp.asarray(advantages)  # numpy float64 in: keep JAX's float32
  if thresholds:
    real = mask > 0
    # NaN marks padding, which nanpercentile leaves out.
    real_advantages = jnp.where(real, advantages, jnp.nan)
    weights = jnp.zeros_like(advantages)
    for percentile, weight, minimum in thresholds:
      cut = jnp.maximum(minimum, jnp.nanpercentile(real_advantages, percentile))
      weights = weights + weight * (real & (advantages >= cut)).astype(advantages.dtype)
    return jax.lax.stop_gradient(weights)
  return jax.lax.stop_gradient(jnp.minimum(jnp.exp(advantages / beta), w_max))


def awr_loss(log_probs, weights, mask):
  """Advantage-weighted regression: -E[w log pi(a|s)]."""
  return -masked_mean(log_probs * jax.lax.stop_gradient(weights), mask)


def advantage_norm(advantages, mask):
  """L2 norm of the advantages over the real steps of the batch."""
  return jnp.sqrt(jnp.sum((advantages * mask) ** 2))


def explained_variance(targets, values, mask):
  """1 - Var(targets - values) / Var(targets) over real steps (1 = perfect, <= 0 = useless)."""
  def variance(x):
    mean = masked_mean(x, mask)
    return masked_mean((x - mean) ** 2, mask)
  return 1.0 - variance(targets - values) / jnp.maximum(variance(targets), 1e-8)


def awr_weight_stats(weights, mask):
  """awr_weight_{mean,std,min,max} of AWR step weights over the real steps."""
  real = mask > 0
  mean = masked_mean(weights, mask)
  return {
      'awr_weight_mean': mean,
      'awr_weight_std': jnp.sqrt(masked_mean((weights - mean) ** 2, mask)),
      'awr_weight_min': jnp.min(jnp.where(real, weights, jnp.inf)),
      'awr_weight_max': jnp.max(jnp.where(real, weights, -jnp.inf)),
  }
