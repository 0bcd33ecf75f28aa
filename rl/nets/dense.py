"""Dense: flax's Dense layer, computed as one matrix product over all leading axes."""

from __future__ import annotations

import flax.linen as nn
import jax


class Dense(nn.Dense):
  """`flax.linen.Dense` that multiplies a [..., features] input as one [rows, features] matrix.

  The models' inputs are [B, L, ...]. XLA's CPU backend compiles a dense
  layer on such an input to slower code than on the same numbers as a
  matrix: the PPOJoint epoch program of benchmarks/jax_native_throughput.py
  runs about 7% faster this way (docs/performance.md). The parameters are
  those of `nn.Dense`.
  """

  @nn.compact
  def __call__(self, inputs: jax.Array) -> jax.Array:
    if inputs.ndim <= 2:
      return super().__call__(inputs)
    rows = inputs.reshape((-1, inputs.shape[-1]))
    return super().__call__(rows).reshape(inputs.shape[:-1] + (self.features,))
