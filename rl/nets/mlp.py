"""The MLP body: Dense layers on flattened observations."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import flax.linen as nn
import jax
import jax.numpy as jnp

from rl.configurables import configurable
from rl.errors import ConfigError
from rl.nets.activations import resolve_activation
from rl.nets.dense import Dense
from rl.nets.initializers import HIDDEN_KERNEL_INIT
from rl.nets.initializers import symmetric_uniform

# The hidden layers' initialisations by name. 'pytorch' is PyTorch's nn.Linear
# default, weights and biases U(-1/sqrt(fan_in), 1/sqrt(fan_in)): what
# Stable-Baselines3 uses with ortho_init=False, as the RL Zoo's tuned MuJoCo
# PPO settings do. Its weights are about 2.4 times smaller than orthogonal
# ones of gain sqrt(2), which matters at those settings' small learning rates.
_INITIALIZERS = {  # name -> fan_in -> (kernel init, bias init)
    'orthogonal': lambda fan_in: (HIDDEN_KERNEL_INIT, nn.initializers.zeros),
    'pytorch': lambda fan_in: (symmetric_uniform(fan_in ** -0.5),) * 2,
}
KERNEL_INITIALIZERS = tuple(_INITIALIZERS)


class MLPModule(nn.Module):
  """Dense + activation per width; [B, L, *obs_shape] -> [B, L, features].

  With `flatten`, the trailing observation dims are flattened first (a
  scalar observation [B, L] becomes [B, L, 1]); without it, Dense layers act
  on the last axis only. With no widths the module is (flatten and) identity.
  """

  layer_widths: Sequence[int] = (64, 64)
  activation_fn: str | Callable = 'relu'
  out_activation: bool = True
  flatten: bool = True
  kernel_initializer: str = 'orthogonal'

  @nn.compact
  def __call__(self, x: jax.Array) -> jax.Array:
    activation = resolve_activation(self.activation_fn)
    if self.flatten:
      if x.ndim < 2:
        raise ValueError(
            f'MLP expects inputs [B, L, *obs_shape]; got shape {x.shape}.')
      x = jnp.reshape(x, x.shape[:2] + (-1,))
    n = len(self.layer_widths)
    for i, width in enumerate(self.layer_widths):
      kernel_init, bias_init = _INITIALIZERS[self.kernel_initializer](x.shape[-1])
      x = Dense(int(width), kernel_init=kernel_init, bias_init=bias_init, name=f'dense_{i}')(x)
      if i < n - 1 or self.out_activation:
        x = activation(x)
    return x


@configurable
def MLP(layer_widths: Sequence[int] = (64, 64),
        activation_fn: str | Callable = 'relu',
        out_activation: bool = True,
        flatten: bool = True,
        kernel_initializer: str = 'orthogonal') -> MLPModule:
  """Builds an MLP body (see `MLPModule`).

  Args:
    layer_widths: units of each Dense layer, in order; () is no layer: the
      (flattened) observations pass through.
    activation_fn: activation after each layer: 'relu', 'tanh', 'gelu',
      'elu', 'swish', 'silu', 'sigmoid', 'identity' or 'linear' (rl.nets.activations).
    out_activation: apply the activation after the last layer too.
    flatten: flatten each observation to one feature axis first; False:
      the layers act on the last axis only.
    kernel_initializer: the layers' initialisation: 'orthogonal' (gain
      sqrt(2), zero biases) or 'pytorch' (PyTorch's nn.Linear default,
      weights and biases uniform in +-1/sqrt(fan_in)).
  """
  if any(width < 1 for width in layer_widths):
    raise ConfigError(f'MLP.layer_widths = {tuple(layer_widths)!r} has a layer of fewer than '
                      'one unit; give every layer >= 1, e.g. MLP.layer_widths = (64, 64).')
  if kernel_initializer not in KERNEL_INITIALIZERS:
    raise ConfigError(f'MLP.kernel_initializer = {kernel_initializer!r} is not one of '
                      f"{', '.join(repr(k) for k in KERNEL_INITIALIZERS)}.")
  # Tuples keep the module hashable/comparable (gin may hand over lists).
  return MLPModule(layer_widths=tuple(int(w) for w in layer_widths),
                   activation_fn=activation_fn,
                   out_activation=out_activation,
                   flatten=flatten,
                   kernel_initializer=kernel_initializer)
