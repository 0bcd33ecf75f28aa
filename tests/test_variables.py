"""Tests for rl.nets.variables: top-level layer order and copying shared
layers between models."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from net_helpers import FakeDistribution, N, OBS, init
from rl.nets.heads import Policy, Quality, Value
from rl.nets.mlp import MLP
from rl.nets.normalizer import Normalize
from rl.nets.variables import copy_shared_layers, top_level_layers


def test_top_level_layers_order():
  dist = FakeDistribution(N)
  assert top_level_layers(init(Policy(dist))) == ['body', 'policy_head']
  with_norm = init(Value(normalizer=Normalize))
  assert top_level_layers(with_norm) == ['normalizer', 'body', 'value_head']
  # A bare params dict cannot show the (param-less) normaliser.
  assert top_level_layers(with_norm['params']) == ['body', 'value_head']
  assert top_level_layers(init(Quality(n_actions=N))) == ['body', 'quality_head']
  q = init(Value(inject_actions=True), jnp.zeros((2, 1), jnp.int32))
  assert top_level_layers(q) == ['body', 'action_injector', 'value_head']


def _with_stats(model, variables, obs):
  _, updates = model.apply(variables, obs, update_normalizer=True, mutable=['normalizer'])
  return {**variables, **updates}


def test_copy_shared_layers_copies_exactly_first_n():
  policy = Policy(FakeDistribution(N), normalizer=Normalize)
  value = Value(normalizer=Normalize)
  src = _with_stats(policy, init(policy, key=1), OBS)
  dst = init(value, key=2)
  src_before = jax.tree_util.tree_map(np.array, src)
  dst_before = jax.tree_util.tree_map(np.array, dst)

  one = copy_shared_layers(src, dst, 1)  # normaliser statistics only
  jax.tree_util.tree_map(np.testing.assert_array_equal,
                         one['normalizer'], src['normalizer'])
  jax.tree_util.tree_map(np.testing.assert_array_equal, one['params'], dst['params'])

  two = copy_shared_layers(src, dst, 2)  # normaliser + body
  jax.tree_util.tree_map(np.testing.assert_array_equal,
                         two['params']['body'], src['params']['body'])
  jax.tree_util.tree_map(np.testing.assert_array_equal,
                         two['params']['value_head'], dst['params']['value_head'])
  assert set(two['params']) == {'body', 'value_head'}

  zero = copy_shared_layers(src, dst, 0)
  jax.tree_util.tree_map(np.testing.assert_array_equal, zero, dst)

  # Inputs are untouched.
  jax.tree_util.tree_map(np.testing.assert_array_equal, src, src_before)
  jax.tree_util.tree_map(np.testing.assert_array_equal, dst, dst_before)
  # The copied model still runs.
  assert value.apply(two, OBS).shape == (2, 1, 1)


def test_copy_shared_layers_raises_on_mismatch():
  dist = FakeDistribution(N)
  with_norm = init(Policy(dist, normalizer=Normalize))
  without_norm = init(Value())
  with pytest.raises(ValueError, match='differ'):
    copy_shared_layers(with_norm, without_norm, 1)
  shallow_body = lambda: MLP(layer_widths=(64,))
  shallow = init(Value(body=shallow_body))
  with pytest.raises(ValueError, match='structure'):
    copy_shared_layers(without_norm, shallow, 1)
  with pytest.raises(ValueError, match='Cannot share'):
    copy_shared_layers(without_norm, without_norm, 3)
  with pytest.raises(ValueError):
    copy_shared_layers(without_norm, without_norm, -1)
