"""Tests for rl.nets.normalizer: running statistics, sample limit, and the
output computed from the updated statistics."""

import functools

import jax
import jax.numpy as jnp
import numpy as np

from net_helpers import init
from rl.nets.normalizer import Normalize


# Eager JAX compiles each primitive once per shape, and the normaliser's
# update is dozens of ops fed many batch shapes, so each call is jitted as one
# program.
_JITTED = {}


def _jit(model, method, static):
  key = (id(model), method, static)
  if key not in _JITTED:
    fn = functools.partial(getattr(model, method), **dict(static))
    # Keep the model alive so its id cannot be reused by another object.
    _JITTED[key] = (model, jax.jit(fn))
  return _JITTED[key][1]


def _norm_apply(model, variables, *args, **kwargs):
  if isinstance(kwargs.get('mutable'), list):
    kwargs['mutable'] = tuple(kwargs['mutable'])
  return _jit(model, 'apply', tuple(sorted(kwargs.items())))(variables, *args)


def _norm_state(variables):
  return variables['normalizer']


def test_normalize_matches_numpy_statistics():
  norm = Normalize()
  rng = np.random.default_rng(0)
  batches = [rng.normal(3.0, 2.0, size=(b, 3, 2, 2)).astype(np.float32) for b in (4, 1, 7, 5)]
  variables = init(norm, obs=batches[0])
  folded = []
  for batch in batches:
    _, updates = _norm_apply(norm, variables, batch, update=True, mutable=['normalizer'])
    variables = {**variables, **updates}
    folded.append(batch[:, -1])
  folded = np.concatenate(folded).astype(np.float64)
  state = _norm_state(variables)
  assert float(state['count']) == len(folded)
  np.testing.assert_allclose(state['mean'], folded.mean(axis=0), rtol=1e-5)
  np.testing.assert_allclose(state['var'], folded.var(axis=0), rtol=1e-5)
  assert all(v.dtype == jnp.float32 for v in state.values())
  # The output uses the statistics after the update.
  x = batches[-1]
  out = _norm_apply(norm, variables, x)
  expected = (x - folded.mean(0)) / (np.sqrt(folded.var(0)) + 1e-5)
  np.testing.assert_allclose(out, expected, rtol=1e-4, atol=1e-5)


def test_normalize_output_uses_updated_stats():
  norm = Normalize(epsilon=0.0)
  x = jnp.array([[[1.0]], [[3.0]]])  # [B=2, L=1, 1]
  variables = init(norm, obs=x)
  out, _ = _norm_apply(norm, variables, x, update=True, mutable=['normalizer'])
  # mean 2, var 1 after folding both -> outputs -1, +1.
  np.testing.assert_allclose(out[:, 0, 0], [-1.0, 1.0], rtol=1e-6)


def test_normalize_only_folds_newest_timestep():
  norm = Normalize()
  x = jnp.stack([jnp.full((2, 3), 100.0), jnp.array([[1.0, 2, 3], [3.0, 4, 5]])], axis=1)
  variables = init(norm, obs=x)  # x: [B=2, L=2, 3]
  _, updates = _norm_apply(norm, variables, x, update=True, mutable=['normalizer'])
  np.testing.assert_allclose(updates['normalizer']['mean'], [2.0, 3.0, 4.0])
  np.testing.assert_allclose(updates['normalizer']['var'], [1.0, 1.0, 1.0])


def test_normalize_without_update_leaves_state_and_fresh_is_identity():
  norm = Normalize(epsilon=0.0)
  x = jnp.asarray(np.random.default_rng(1).normal(size=(3, 2, 4)), jnp.float32)
  variables = init(norm, obs=x)
  out, updates = _norm_apply(norm, variables, x, mutable=['normalizer'])
  np.testing.assert_array_equal(out, x)
  jax.tree_util.tree_map(np.testing.assert_array_equal, updates, variables)
  state = _norm_state(variables)
  assert float(state['count']) == 0.0
  np.testing.assert_array_equal(state['mean'], np.zeros(4))
  np.testing.assert_array_equal(state['var'], np.ones(4))


def test_normalize_sample_limit():
  norm = Normalize(sample_limit=5)
  x1 = jnp.arange(4.0).reshape(4, 1, 1)
  x2 = jnp.arange(10.0, 14.0).reshape(4, 1, 1)
  variables = init(norm, obs=x1)
  for x in (x1, x2):
    _, updates = _norm_apply(norm, variables, x, update=True, mutable=['normalizer'])
    variables = {**variables, **updates}
  state = _norm_state(variables)
  # 4 + only the first row of the second batch fit under the limit of 5.
  folded = np.array([0.0, 1, 2, 3, 10])
  assert float(state['count']) == 5.0
  np.testing.assert_allclose(state['mean'], [folded.mean()], rtol=1e-6)
  np.testing.assert_allclose(state['var'], [folded.var()], rtol=1e-5)
  _, updates = _norm_apply(norm, variables, x2, update=True, mutable=['normalizer'])
  jax.tree_util.tree_map(np.testing.assert_array_equal, updates, {'normalizer': state})
