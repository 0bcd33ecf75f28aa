"""Running observation normalisation (`Normalize`)."""

from __future__ import annotations

import flax.linen as nn
import jax
import jax.numpy as jnp

from rl.configurables import configurable

# The variable collection that holds running observation statistics. They are
# state, not parameters: optimisers must not touch them, so they live outside
# 'params'.
NORMALIZER_COLLECTION = 'normalizer'


class NormalizeModule(nn.Module):
  """Normalises observations with running statistics.

  State (collection 'normalizer'): count (scalar), mean and var (both of the
  feature shape x.shape[2:]); initially count 0, mean 0, var 1, so a fresh
  normaliser with epsilon 0 is the identity. All float32.

  `__call__(x, update=False)`: with `update`, the newest observation of each
  batch row, x[:, -1], is folded into the statistics — all B at once with
  the parallel (Chan et al.) mean/variance merge, which gives the same
  result as the reference's one-at-a-time Welford update. Only as many rows
  as keep count <= ceil(sample_limit) are folded, so the limit is exact at
  batch granularity too. The output (x - mean) / (sqrt(var) + epsilon) uses
  the statistics after the update, in all modes.

  `update` must be a Python bool (static under jit): it decides whether the
  'normalizer' collection is written, which must be declared mutable anyway.
  The float32 count is exact up to 2**24 folded observations; past that the
  merge weights are still correct to float32 precision.

  Images: the CNN bodies scale uint8 frames themselves, so images need no
  normaliser. One works (it casts to float32, and the body then takes the
  standardised floats as they are), but its per-pixel statistics are a poor
  fit: a pixel that rarely changes has a variance near zero, and the frame
  in which it does change comes out huge (up to 255 / epsilon).
  """

  sample_limit: float = float('inf')
  epsilon: float = 1e-5

  @nn.compact
  def __call__(self, x: jax.Array, update: bool = False) -> jax.Array:
    if x.ndim < 2:
      raise ValueError(
          f'Normalize expects inputs [B, L, *obs_shape]; got shape {x.shape}.')
    x = jnp.asarray(x, jnp.float32)
    feature_shape = x.shape[2:]
    count = self.variable(NORMALIZER_COLLECTION, 'count',
                          lambda: jnp.zeros((), jnp.float32))
    mean = self.variable(NORMALIZER_COLLECTION, 'mean',
                         lambda: jnp.zeros(feature_shape, jnp.float32))
    var = self.variable(NORMALIZER_COLLECTION, 'var',
                        lambda: jnp.ones(feature_shape, jnp.float32))

    # Initialisation must produce the canonical fresh state (count 0), even
    # if the caller initialises through a collection-mode call.
    if update and not self.is_initializing():
      count.value, mean.value, var.value = self._merge(
          count.value, mean.value, var.value, x[:, -1])

    return (x - mean.value) / (jnp.sqrt(var.value) + self.epsilon)

  def _merge(self, count, mean, var, batch):
    """Folds `batch` [B, *feature_shape] into (count, mean, var)."""
    b = batch.shape[0]
    # How many rows fit under the limit; the rest of the batch is ignored,
    # matching a one-at-a-time update that stops once count >= limit.
    room = jnp.ceil(jnp.float32(self.sample_limit) - count)
    n_take = jnp.clip(room, 0.0, float(b))
    row_weights = (jnp.arange(b, dtype=jnp.float32) < n_take).astype(jnp.float32)
    n_b = jnp.sum(row_weights)
    weights = jnp.reshape(row_weights, (b,) + (1,) * (batch.ndim - 1))
    safe_n_b = jnp.maximum(n_b, 1.0)
    mean_b = jnp.sum(weights * batch, axis=0) / safe_n_b
    var_b = jnp.sum(weights * jnp.square(batch - mean_b), axis=0) / safe_n_b

    n = count + n_b
    safe_n = jnp.maximum(n, 1.0)
    delta = mean_b - mean
    new_mean = mean + delta * (n_b / safe_n)
    # Sum of squared deviations of the union = both parts' own sums plus
    # the between-group term. With count 0 the old var (1) gets weight 0,
    # so the initial var never leaks into the statistics.
    m2 = var * count + var_b * n_b + jnp.square(delta) * (count * n_b / safe_n)
    new_var = m2 / safe_n

    # Bit-exact no-op when nothing was folded (limit reached).
    folded = n_b > 0
    return (jnp.where(folded, n, count).astype(jnp.float32),
            jnp.where(folded, new_mean, mean).astype(jnp.float32),
            jnp.where(folded, new_var, var).astype(jnp.float32))


@configurable
def Normalize(sample_limit: float = float('inf'), epsilon: float = 1e-5) -> NormalizeModule:
  """Builds a running observation normaliser (see `NormalizeModule`).

  Args:
    sample_limit: observations folded into the running mean and variance,
      after which they stay fixed (inf: they never do).
    epsilon: added to the standard deviation: (x - mean) / (std + epsilon).
  """
  return NormalizeModule(sample_limit=float(sample_limit), epsilon=float(epsilon))
