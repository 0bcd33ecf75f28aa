"""Kernel initialisers shared by bodies and heads."""

from __future__ import annotations

import math
from collections.abc import Callable

import flax.linen as nn
import jax
import jax.numpy as jnp

# Hidden layers: orthogonal with gain sqrt(2), zero bias. This is the init
# CleanRL and SB3 use for on-policy agents (following "What matters in
# on-policy RL", Andrychowicz et al. 2021): orthogonal matrices preserve the
# norm of activations through depth, and sqrt(2) compensates for ReLU
# discarding half of the signal, so early gradients are well scaled without
# any warm-up. Zero bias keeps the initial function centred.
HIDDEN_KERNEL_INIT = nn.initializers.orthogonal(scale=math.sqrt(2.0))


def symmetric_uniform(limit: float) -> Callable:
  """Initialiser drawing from U(-limit, limit) (flax's `uniform` is [0, s))."""

  def init(key, shape, dtype=jnp.float32):
    return jax.random.uniform(key, shape, dtype, minval=-limit, maxval=limit)

  return init
