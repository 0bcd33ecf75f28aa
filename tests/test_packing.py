"""rl.data.packing: a tree of device arrays read back in one transfer, bit for bit."""
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from rl.data import packing


class Result(NamedTuple):
  losses: jax.Array
  step: jax.Array


def example_tree():
  # A NaN with a payload and a negative zero: a conversion would lose them, a bitcast keeps them.
  odd_floats = np.array([np.nan, -0.0, 1.5e-42, np.inf], np.float32)
  odd_floats.view(np.uint32)[0] = 0x7FC00123
  return {
      'policy': Result(jnp.asarray(odd_floats), jnp.int32(-7)),
      'value': Result(jnp.arange(6, dtype=jnp.float32).reshape(2, 3), jnp.int32(2**31 - 1)),
      'extra': {'done': jnp.array([True, False, True]), 'seed': jnp.uint32(2**32 - 1)},
  }


def test_a_packed_tree_comes_back_bit_for_bit():
  tree = example_tree()
  vector, layout = jax.jit(lambda t: packing.pack(t)[0])(tree), packing.pack(tree)[1]
  assert vector.dtype == jnp.uint32 and vector.shape == (4 + 1 + 6 + 1 + 3 + 1,)
  back = packing.unpack(vector, layout)
  assert jax.tree_util.tree_structure(back) == jax.tree_util.tree_structure(tree)
  for got, want in zip(jax.tree_util.tree_leaves(back), jax.tree_util.tree_leaves(tree)):
    want = np.asarray(want)
    # Arrays as arrays; 0-d leaves as numpy scalars.
    assert isinstance(got, np.generic if want.shape == () else np.ndarray)
    assert got.dtype == want.dtype and got.shape == want.shape
    if want.dtype == np.bool_:
      np.testing.assert_array_equal(got, want)
    else:
      np.testing.assert_array_equal(got.view(np.uint32), want.view(np.uint32))


def test_an_empty_tree_packs_to_an_empty_vector():
  vector, layout = packing.pack({})
  assert vector.shape == (0,)
  assert packing.unpack(vector, layout) == {}


def test_leaves_that_are_not_32_bit_are_refused():
  with pytest.raises(TypeError, match='float16'):
    packing.pack({'x': jnp.zeros(2, jnp.float16)})


def test_a_vector_that_does_not_fit_its_layout_is_refused():
  vector, layout = packing.pack({'x': jnp.zeros(3)})
  with pytest.raises(ValueError, match='does not fit'):
    packing.unpack(np.zeros(4, np.uint32), layout)
  del vector


def test_packed_jit_returns_what_jit_returns():
  def fn(state, scale):
    kept = {'state': state * scale}
    return kept, example_tree() | {'scaled': state.sum() * scale}

  packed = packing.PackedJit(fn)
  state = jnp.arange(3.0)
  for scale in (2.0, 3.0):  # a second call reuses the compiled program and its layout
    kept, host = packed(state, scale)
    want_kept, want_host = jax.jit(fn)(state, scale)
    assert isinstance(kept['state'], jax.Array)
    np.testing.assert_array_equal(kept['state'], want_kept['state'])
    for got, want in zip(jax.tree_util.tree_leaves(host), jax.tree_util.tree_leaves(want_host)):
      want = np.asarray(want)
      assert isinstance(got, np.generic if want.shape == () else np.ndarray)
      assert (got.dtype, got.shape, got.tobytes()) == (want.dtype, want.shape, want.tobytes())
