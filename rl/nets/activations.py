"""The activation functions bodies accept by name."""

from __future__ import annotations

from collections.abc import Callable

import flax.linen as nn
import jax

from rl.nets.lookup import by_name

ACTIVATIONS: dict[str, Callable[[jax.Array], jax.Array]] = {
    'relu': nn.relu,
    'tanh': nn.tanh,
    'gelu': nn.gelu,
    'elu': nn.elu,
    'swish': nn.swish,
    'silu': nn.silu,
    'sigmoid': nn.sigmoid,
    'identity': lambda x: x,
    'linear': lambda x: x,
}


def resolve_activation(activation: str | Callable) -> Callable:
  """The activation `activation` names (or `activation` itself if callable)."""
  return by_name(activation, ACTIVATIONS, 'activation_fn')
