"""Tests for rl.nets.mlp: flattening, widths and activations of the MLP body."""

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from net_helpers import init
from rl.errors import ConfigError
from rl.nets.dense import Dense
from rl.nets.mlp import MLP


def test_mlp_flatten_and_widths():
  x = jnp.ones((2, 5, 1, 3))  # [B, L, 1, 3]
  flat = MLP(layer_widths=(64, 64))
  assert flat.apply(init(flat, obs=x), x).shape == (2, 5, 64)
  no_flat = MLP(layer_widths=(64,), flatten=False)
  assert no_flat.apply(init(no_flat, obs=x), x).shape == (2, 5, 1, 64)
  scalar_obs = jnp.ones((2, 5))  # scalar observations flatten to one feature
  flatten_only = MLP(layer_widths=())
  assert flatten_only.apply({}, scalar_obs).shape == (2, 5, 1)


def test_mlp_activation_names_and_out_activation():
  x = jnp.asarray(np.random.default_rng(0).normal(size=(4, 1, 3)), jnp.float32)
  relu_out = MLP(layer_widths=(64,), activation_fn='relu', out_activation=True)
  variables = init(relu_out, obs=x)
  y = relu_out.apply(variables, x)
  assert jnp.all(y >= 0) and jnp.any(y > 0)
  linear_out = MLP(layer_widths=(64,), activation_fn='relu', out_activation=False)
  assert jnp.any(linear_out.apply(variables, x) < 0)
  tanh_out = MLP(layer_widths=(64,), activation_fn=jnp.tanh)  # a callable
  assert jnp.all(jnp.abs(tanh_out.apply(variables, 10 * x)) <= 1)
  with pytest.raises(ConfigError, match='activation_fn'):
    init(MLP(activation_fn='nope'), obs=x)


def test_pytorch_initialisation_draws_weights_and_biases_within_one_over_root_fan_in():
  x = jnp.ones((2, 1, 16))
  params = init(MLP(layer_widths=(64, 32), kernel_initializer='pytorch'), obs=x)['params']
  for name, fan_in in (('dense_0', 16), ('dense_1', 64)):
    for leaf in ('kernel', 'bias'):
      values = np.asarray(params[name][leaf])
      # Uniform in +-1/sqrt(fan_in): inside the bound, and spread over it (max near the bound).
      assert np.abs(values).max() <= fan_in ** -0.5
      assert np.abs(values).max() > 0.8 * fan_in ** -0.5
  orthogonal = init(MLP(layer_widths=(64, 32)), obs=x)['params']
  assert not np.asarray(orthogonal['dense_0']['bias']).any()
  with pytest.raises(ConfigError, match="MLP.kernel_initializer = 'he' is not one of"):
    MLP(kernel_initializer='he')


@pytest.mark.parametrize('shape', [(5, 3), (4, 2, 3), (2, 3, 4, 3)])
def test_dense_matches_flax_dense(shape):
  """rl.nets.dense.Dense computes every rank as one matrix product: flax's parameters and
  flax's results, up to float rounding."""
  x = jnp.asarray(np.random.default_rng(1).normal(size=shape), jnp.float32)
  ours, theirs = Dense(7), nn.Dense(7)
  variables = theirs.init(jax.random.key(0), x)
  assert jax.tree.map(jnp.shape, ours.init(jax.random.key(0), x)) == jax.tree.map(
      jnp.shape, variables)
  y = ours.apply(variables, x)
  assert y.shape == shape[:-1] + (7,)
  np.testing.assert_allclose(y, theirs.apply(variables, x), rtol=1e-6, atol=1e-6)
  kernel, bias = variables['params']['kernel'], variables['params']['bias']
  np.testing.assert_allclose(y, np.asarray(x) @ np.asarray(kernel) + np.asarray(bias),
                             rtol=1e-5, atol=1e-5)
