"""Tests for rl.nets.models: shapes, running normalisation, Q-value action
injection, head initialisation, layer sharing and gin configuration."""

import functools

import gin
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from rl.nets import models


class FakeDistribution:
  """Stand-in for rl.ops.distributions objects: models only read `n_inputs`."""

  def __init__(self, n_inputs):
    self.n_inputs = n_inputs


pytestmark = pytest.mark.usefixtures('fast_compilation')


@pytest.fixture(autouse=True)
def clear_gin():
  gin.clear_config()
  yield
  gin.clear_config()


OBS = jnp.arange(6, dtype=jnp.float32).reshape(2, 1, 3) / 6.0

# Orthogonal init compiles a QR per new kernel shape (~1 s on a slow CPU), so
# the tests reuse the default body (3 -> 64 -> 64) and a few head sizes.
N = 4


# Speed on CPU is all compilation. Eager JAX compiles each primitive once per
# shape: cheap for model forwards that reuse the same few layer shapes, costly
# for the normaliser's update (dozens of ops, fed many batch shapes), whose
# calls are therefore jitted as one program each.
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


def _init(model, *extra, obs=OBS, key=0):
  # Eager too: the orthogonal initialiser is itself jitted and cached per
  # kernel shape, so models sharing shapes reuse its compiled QR.
  return models.init_variables(model, jax.random.key(key), obs, *extra)


def _shapes(tree):
  return jax.tree_util.tree_map(lambda a: tuple(a.shape), tree)


# --------------------------------------------------------------------------
# Output shapes
# --------------------------------------------------------------------------


def test_policy_shape():
  model = models.Policy(FakeDistribution(N))
  assert model.apply(_init(model), OBS).shape == (2, 1, N)


def test_value_shape():
  model = models.Value()
  assert model.apply(_init(model), OBS).shape == (2, 1, 1)


@pytest.mark.parametrize('joint', [True, False])
def test_policy_and_value_shapes(joint):
  model = models.PolicyAndValue(FakeDistribution(N), joint=joint,
                                normalizer=models.Normalize)
  variables = _init(model)
  dist_inputs, values = model.apply(variables, OBS)
  assert [dist_inputs.shape, values.shape] == [(2, 1, N), (2, 1, 1)]
  bodies = {'body'} if joint else {'policy_body', 'value_body'}
  assert set(variables['params']) == bodies | {'policy_head', 'value_head'}
  # One normaliser, shared by both heads in either layout.
  assert list(variables['normalizer']) == ['normalizer']
  if not joint:  # separate bodies really are separate
    assert not np.allclose(variables['params']['policy_body']['dense_0']['kernel'],
                           variables['params']['value_body']['dense_0']['kernel'])


def test_quality_shape():
  model = models.Quality(n_actions=N)
  assert model.apply(_init(model), OBS).shape == (2, 1, N)


def test_mlp_flatten_and_widths():
  x = jnp.ones((2, 5, 1, 3))  # [B, L, 1, 3]
  flat = models.MLP(layer_widths=(64, 64))
  assert flat.apply(_init(flat, obs=x), x).shape == (2, 5, 64)
  no_flat = models.MLP(layer_widths=(64,), flatten=False)
  assert no_flat.apply(_init(no_flat, obs=x), x).shape == (2, 5, 1, 64)
  scalar_obs = jnp.ones((2, 5))  # scalar observations flatten to one feature
  flatten_only = models.MLP(layer_widths=())
  assert flatten_only.apply({}, scalar_obs).shape == (2, 5, 1)


def test_mlp_activation_names_and_out_activation():
  x = jnp.asarray(np.random.default_rng(0).normal(size=(4, 1, 3)), jnp.float32)
  relu_out = models.MLP(layer_widths=(64,), activation_fn='relu', out_activation=True)
  variables = _init(relu_out, obs=x)
  y = relu_out.apply(variables, x)
  assert jnp.all(y >= 0) and jnp.any(y > 0)
  linear_out = models.MLP(layer_widths=(64,), activation_fn='relu', out_activation=False)
  assert jnp.any(linear_out.apply(variables, x) < 0)
  tanh_out = models.MLP(layer_widths=(64,), activation_fn=jnp.tanh)  # a callable
  assert jnp.all(jnp.abs(tanh_out.apply(variables, 10 * x)) <= 1)
  with pytest.raises(ValueError, match='activation'):
    _init(models.MLP(activation_fn='nope'), obs=x)


def test_model_with_normalizer_updates_under_jit():
  model = models.Policy(FakeDistribution(N), normalizer=models.Normalize)
  variables = _init(model)
  assert variables['normalizer']['normalizer']['count'] == 0

  @jax.jit
  def collect(v, obs):
    return model.apply(v, obs, update_normalizer=True, mutable=['normalizer'])

  out, updates = collect(variables, OBS)
  assert out.shape == (2, 1, N)
  assert float(updates['normalizer']['normalizer']['count']) == 2.0
  # Training-mode call uses but does not need to mutate the statistics.
  new_vars = {**variables, **updates}
  assert model.apply(new_vars, OBS).shape == (2, 1, N)


# --------------------------------------------------------------------------
# Normalize
# --------------------------------------------------------------------------


def _norm_state(variables):
  return variables['normalizer']


def test_normalize_matches_numpy_statistics():
  norm = models.Normalize()
  rng = np.random.default_rng(0)
  batches = [rng.normal(3.0, 2.0, size=(b, 3, 2, 2)).astype(np.float32) for b in (4, 1, 7, 5)]
  variables = _init(norm, obs=batches[0])
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
  norm = models.Normalize(epsilon=0.0)
  x = jnp.array([[[1.0]], [[3.0]]])  # [B=2, L=1, 1]
  variables = _init(norm, obs=x)
  out, _ = _norm_apply(norm, variables, x, update=True, mutable=['normalizer'])
  # mean 2, var 1 after folding both -> outputs -1, +1.
  np.testing.assert_allclose(out[:, 0, 0], [-1.0, 1.0], rtol=1e-6)


def test_normalize_only_folds_newest_timestep():
  norm = models.Normalize()
  x = jnp.stack([jnp.full((2, 3), 100.0), jnp.array([[1.0, 2, 3], [3.0, 4, 5]])], axis=1)
  variables = _init(norm, obs=x)  # x: [B=2, L=2, 3]
  _, updates = _norm_apply(norm, variables, x, update=True, mutable=['normalizer'])
  np.testing.assert_allclose(updates['normalizer']['mean'], [2.0, 3.0, 4.0])
  np.testing.assert_allclose(updates['normalizer']['var'], [1.0, 1.0, 1.0])


def test_normalize_without_update_leaves_state_and_fresh_is_identity():
  norm = models.Normalize(epsilon=0.0)
  x = jnp.asarray(np.random.default_rng(1).normal(size=(3, 2, 4)), jnp.float32)
  variables = _init(norm, obs=x)
  out, updates = _norm_apply(norm, variables, x, mutable=['normalizer'])
  np.testing.assert_array_equal(out, x)
  jax.tree_util.tree_map(np.testing.assert_array_equal, updates, variables)
  state = _norm_state(variables)
  assert float(state['count']) == 0.0
  np.testing.assert_array_equal(state['mean'], np.zeros(4))
  np.testing.assert_array_equal(state['var'], np.ones(4))


def test_normalize_sample_limit():
  norm = models.Normalize(sample_limit=5)
  x1 = jnp.arange(4.0).reshape(4, 1, 1)
  x2 = jnp.arange(10.0, 14.0).reshape(4, 1, 1)
  variables = _init(norm, obs=x1)
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


# --------------------------------------------------------------------------
# Value with injected actions (Q-values)
# --------------------------------------------------------------------------


@pytest.mark.parametrize('multiplicative', [False, True])
def test_value_with_discrete_actions(multiplicative):
  model = models.Value(inject_actions=True, is_discrete=True, vocab_size=3,
                       inject_actions_dim=64, inject_actions_n_layers=2,
                       multiplicative_action_injection=multiplicative)
  actions = jnp.array([[0], [2]])  # [B, L]
  variables = _init(model, actions)
  assert 'action_injector' in variables['params']
  q = model.apply(variables, OBS, actions)
  assert q.shape == (2, 1, 1)
  # Extra sample axis: [B, n, L] -> [B, n, L, 1], consistent with the plain call.
  sampled = jnp.array([[[0], [1], [2]], [[2], [1], [0]]])
  q_sampled = model.apply(variables, OBS, sampled)
  assert q_sampled.shape == (2, 3, 1, 1)
  np.testing.assert_allclose(q_sampled[0, 0], q[0], rtol=1e-5)
  np.testing.assert_allclose(q_sampled[1, 0], q[1], rtol=1e-5)
  assert not np.allclose(q_sampled[0, 0], q_sampled[0, 2])  # actions matter


def test_value_with_continuous_actions():
  model = models.Value(inject_actions=True, is_discrete=False)
  actions = jnp.ones((2, 1, 3)) * jnp.array([[[0.5]], [[-1.0]]])  # [B, L, action_dim]
  variables = _init(model, actions)
  q = model.apply(variables, OBS, actions)
  assert q.shape == (2, 1, 1)
  sampled = jnp.stack([actions, -actions, actions * 0.5, actions], axis=1)  # [B, 4, L, 3]
  q_sampled = model.apply(variables, OBS, sampled)
  assert q_sampled.shape == (2, 4, 1, 1)
  np.testing.assert_allclose(q_sampled[:, 3], q, rtol=1e-5)


def test_value_action_argument_checks():
  with pytest.raises(ValueError, match='actions'):
    _init(models.Value(inject_actions=True))
  plain = models.Value()
  with pytest.raises(ValueError, match='inject_actions=False'):
    _init(plain, jnp.zeros((2, 1), jnp.int32))


# --------------------------------------------------------------------------
# Head initialisation
# --------------------------------------------------------------------------


def test_head_init_range_bounds_kernel():
  r = 0.003
  policy = models.Policy(FakeDistribution(N), head_init_range=r)
  kernel = _init(policy)['params']['policy_head']['kernel']
  assert float(jnp.max(jnp.abs(kernel))) <= r
  assert float(jnp.max(jnp.abs(kernel))) > r / 4  # actually spread over the range
  value = models.Value(head_init_range=r)
  head = _init(value)['params']['value_head']
  assert float(jnp.max(jnp.abs(head['kernel']))) <= r
  np.testing.assert_array_equal(head['bias'], 0.0)


def test_default_head_gains():
  policy_kernel = _init(models.Policy(FakeDistribution(N)))['params']['policy_head']['kernel']
  value_kernel = _init(models.Value())['params']['value_head']['kernel']
  # Orthogonal columns have norm equal to the gain.
  np.testing.assert_allclose(jnp.linalg.norm(policy_kernel, axis=0), 0.01, rtol=1e-4)
  np.testing.assert_allclose(jnp.linalg.norm(value_kernel, axis=0), 1.0, rtol=1e-4)


# --------------------------------------------------------------------------
# Top-level layers and weight sharing
# --------------------------------------------------------------------------


def test_top_level_layers_order():
  dist = FakeDistribution(N)
  assert models.top_level_layers(_init(models.Policy(dist))) == ['body', 'policy_head']
  with_norm = _init(models.Value(normalizer=models.Normalize))
  assert models.top_level_layers(with_norm) == ['normalizer', 'body', 'value_head']
  # A bare params dict cannot show the (param-less) normaliser.
  assert models.top_level_layers(with_norm['params']) == ['body', 'value_head']
  assert models.top_level_layers(_init(models.Quality(n_actions=N))) == ['body', 'quality_head']
  q = _init(models.Value(inject_actions=True), jnp.zeros((2, 1), jnp.int32))
  assert models.top_level_layers(q) == ['body', 'action_injector', 'value_head']


def _with_stats(model, variables, obs):
  _, updates = model.apply(variables, obs, update_normalizer=True, mutable=['normalizer'])
  return {**variables, **updates}


def test_copy_shared_layers_copies_exactly_first_n():
  policy = models.Policy(FakeDistribution(N), normalizer=models.Normalize)
  value = models.Value(normalizer=models.Normalize)
  src = _with_stats(policy, _init(policy, key=1), OBS)
  dst = _init(value, key=2)
  src_before = jax.tree_util.tree_map(np.array, src)
  dst_before = jax.tree_util.tree_map(np.array, dst)

  one = models.copy_shared_layers(src, dst, 1)  # normaliser statistics only
  jax.tree_util.tree_map(np.testing.assert_array_equal,
                         one['normalizer'], src['normalizer'])
  jax.tree_util.tree_map(np.testing.assert_array_equal, one['params'], dst['params'])

  two = models.copy_shared_layers(src, dst, 2)  # normaliser + body
  jax.tree_util.tree_map(np.testing.assert_array_equal,
                         two['params']['body'], src['params']['body'])
  jax.tree_util.tree_map(np.testing.assert_array_equal,
                         two['params']['value_head'], dst['params']['value_head'])
  assert set(two['params']) == {'body', 'value_head'}

  zero = models.copy_shared_layers(src, dst, 0)
  jax.tree_util.tree_map(np.testing.assert_array_equal, zero, dst)

  # Inputs are untouched.
  jax.tree_util.tree_map(np.testing.assert_array_equal, src, src_before)
  jax.tree_util.tree_map(np.testing.assert_array_equal, dst, dst_before)
  # The copied model still runs.
  assert value.apply(two, OBS).shape == (2, 1, 1)


def test_copy_shared_layers_raises_on_mismatch():
  dist = FakeDistribution(N)
  with_norm = _init(models.Policy(dist, normalizer=models.Normalize))
  without_norm = _init(models.Value())
  with pytest.raises(ValueError, match='differ'):
    models.copy_shared_layers(with_norm, without_norm, 1)
  shallow_body = lambda: models.MLP(layer_widths=(64,))
  shallow = _init(models.Value(body=shallow_body))
  with pytest.raises(ValueError, match='structure'):
    models.copy_shared_layers(without_norm, shallow, 1)
  with pytest.raises(ValueError, match='Cannot share'):
    models.copy_shared_layers(without_norm, without_norm, 3)
  with pytest.raises(ValueError):
    models.copy_shared_layers(without_norm, without_norm, -1)


# --------------------------------------------------------------------------
# gin
# --------------------------------------------------------------------------


def test_gin_binds_mlp_width_for_default_body():
  gin.parse_config(['MLP.layer_widths = (8,)'])
  variables = _init(models.Value())
  assert _shapes(variables['params']['body']) == {
      'dense_0': {'kernel': (3, 8), 'bias': (8,)}}


def test_gin_builds_model_from_config():
  gin.parse_config([
      'MLP.layer_widths = (8,)',
      'Value.body = @MLP',
      'Value.normalizer = @Normalize',
      'Normalize.sample_limit = 10',
  ])
  model = models.Value()
  assert model.normalizer.sample_limit == 10.0
  variables = _init(model)
  assert models.top_level_layers(variables) == ['normalizer', 'body', 'value_head']
  assert variables['params']['body']['dense_0']['kernel'].shape == (3, 8)
