"""Every algorithm's loss as a pure function of arrays.

Inputs are [B, L] arrays with a mask (1 = real step); padding never counts:
sums are divided by the number of real steps, and batch statistics (advantage
normalisation) use real steps only. Trainers turn model outputs into log
probabilities with their distribution and call these; the separate and joint
actor-critic trainers share them.
"""
import jax
import jax.numpy as jnp

from rl.advantages import normalize


def masked_mean(x, mask):
  """Mean of x over the real steps (mask 1); 0 for an all-padding batch."""
  return jnp.sum(x * mask) / jnp.maximum(jnp.sum(mask), 1.0)


def reinforce_loss(log_probs, returns, mask):
  """REINFORCE: -E[log pi(a|s) * normalised return].

  The returns are normalised over the real steps of the batch (mean 0,
  std 1), a baseline that keeps the gradient's scale steady as returns grow.
  The weights carry no gradient: only log pi is differentiated.
  """
  weights = jax.lax.stop_gradient(normalize(returns, mask))
  return -masked_mean(log_probs * weights, mask)
