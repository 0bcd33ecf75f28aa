"""Tests for rl.nets.heads: output shapes, the normaliser in front, Q-value
action injection, head initialisation and gin configuration."""

import gin
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from net_helpers import FakeDistribution, N, OBS, init, shapes
from rl.nets.heads import Policy, PolicyAndValue, Quality, Value
from rl.nets.normalizer import Normalize
from rl.nets.variables import top_level_layers


# --------------------------------------------------------------------------
# Output shapes
# --------------------------------------------------------------------------


# Checks of shapes alone trace the model (jax.eval_shape) and compile nothing; applications whose
# numbers are checked are jitted: one compile each, where op by op every op compiles.


def test_policy_shape():
  model = Policy(FakeDistribution(N))
  assert jax.eval_shape(model.apply, init(model), OBS).shape == (2, 1, N)


def test_value_shape():
  model = Value()
  assert jax.eval_shape(model.apply, init(model), OBS).shape == (2, 1, 1)


@pytest.mark.parametrize('joint', [True, False])
def test_policy_and_value_shapes(joint):
  model = PolicyAndValue(FakeDistribution(N), joint=joint, normalizer=Normalize)
  variables = init(model)
  dist_inputs, values = jax.eval_shape(model.apply, variables, OBS)
  assert [dist_inputs.shape, values.shape] == [(2, 1, N), (2, 1, 1)]
  bodies = {'body'} if joint else {'policy_body', 'value_body'}
  assert set(variables['params']) == bodies | {'policy_head', 'value_head'}
  # One normaliser, shared by both heads in either layout.
  assert list(variables['normalizer']) == ['normalizer']
  if not joint:  # separate bodies really are separate
    assert not np.allclose(variables['params']['policy_body']['dense_0']['kernel'],
                           variables['params']['value_body']['dense_0']['kernel'])


def test_quality_shape():
  model = Quality(n_actions=N)
  assert jax.eval_shape(model.apply, init(model), OBS).shape == (2, 1, N)


def test_model_with_normalizer_updates_under_jit():
  model = Policy(FakeDistribution(N), normalizer=Normalize)
  variables = init(model)
  assert variables['normalizer']['normalizer']['count'] == 0

  @jax.jit
  def collect(v, obs):
    return model.apply(v, obs, update_normalizer=True, mutable=['normalizer'])

  out, updates = collect(variables, OBS)
  assert out.shape == (2, 1, N)
  assert float(updates['normalizer']['normalizer']['count']) == 2.0
  # Training-mode call uses but does not need to mutate the statistics.
  new_vars = {**variables, **updates}
  assert jax.eval_shape(model.apply, new_vars, OBS).shape == (2, 1, N)


# --------------------------------------------------------------------------
# Value with injected actions (Q-values)
# --------------------------------------------------------------------------


@pytest.mark.parametrize('multiplicative', [False, True])
def test_value_with_discrete_actions(multiplicative):
  model = Value(inject_actions=True, is_discrete=True, vocab_size=3,
                inject_actions_dim=64, inject_actions_n_layers=2,
                multiplicative_action_injection=multiplicative)
  actions = jnp.array([[0], [2]])  # [B, L]
  variables = init(model, actions)
  assert 'action_injector' in variables['params']
  apply = jax.jit(model.apply)
  q = apply(variables, OBS, actions)
  assert q.shape == (2, 1, 1)
  # Extra sample axis: [B, n, L] -> [B, n, L, 1], consistent with the plain call.
  sampled = jnp.array([[[0], [1], [2]], [[2], [1], [0]]])
  q_sampled = apply(variables, OBS, sampled)
  assert q_sampled.shape == (2, 3, 1, 1)
  np.testing.assert_allclose(q_sampled[0, 0], q[0], rtol=1e-5)
  np.testing.assert_allclose(q_sampled[1, 0], q[1], rtol=1e-5)
  assert not np.allclose(q_sampled[0, 0], q_sampled[0, 2])  # actions matter


def test_value_with_continuous_actions():
  model = Value(inject_actions=True, is_discrete=False)
  actions = jnp.ones((2, 1, 3)) * jnp.array([[[0.5]], [[-1.0]]])  # [B, L, action_dim]
  variables = init(model, actions)
  apply = jax.jit(model.apply)
  q = apply(variables, OBS, actions)
  assert q.shape == (2, 1, 1)
  sampled = jnp.stack([actions, -actions, actions * 0.5, actions], axis=1)  # [B, 4, L, 3]
  q_sampled = apply(variables, OBS, sampled)
  assert q_sampled.shape == (2, 4, 1, 1)
  np.testing.assert_allclose(q_sampled[:, 3], q, rtol=1e-5)


def test_value_action_argument_checks():
  with pytest.raises(ValueError, match='actions'):
    init(Value(inject_actions=True))
  plain = Value()
  with pytest.raises(ValueError, match='inject_actions=False'):
    init(plain, jnp.zeros((2, 1), jnp.int32))


# --------------------------------------------------------------------------
# Head initialisation
# --------------------------------------------------------------------------


def test_head_init_range_bounds_kernel():
  r = 0.003
  policy = Policy(FakeDistribution(N), head_init_range=r)
  kernel = init(policy)['params']['policy_head']['kernel']
  assert float(jnp.max(jnp.abs(kernel))) <= r
  assert float(jnp.max(jnp.abs(kernel))) > r / 4  # actually spread over the range
  value = Value(head_init_range=r)
  head = init(value)['params']['value_head']
  assert float(jnp.max(jnp.abs(head['kernel']))) <= r
  np.testing.assert_array_equal(head['bias'], 0.0)


def test_default_head_gains():
  policy_kernel = init(Policy(FakeDistribution(N)))['params']['policy_head']['kernel']
  value_kernel = init(Value())['params']['value_head']['kernel']
  # Orthogonal columns have norm equal to the gain.
  np.testing.assert_allclose(jnp.linalg.norm(policy_kernel, axis=0), 0.01, rtol=1e-4)
  np.testing.assert_allclose(jnp.linalg.norm(value_kernel, axis=0), 1.0, rtol=1e-4)


# --------------------------------------------------------------------------
# gin
# --------------------------------------------------------------------------


def test_gin_binds_mlp_width_for_default_body():
  gin.parse_config(['MLP.layer_widths = (8,)'])
  variables = init(Value())
  assert shapes(variables['params']['body']) == {
      'dense_0': {'kernel': (3, 8), 'bias': (8,)}}


def test_gin_builds_model_from_config():
  gin.parse_config([
      'MLP.layer_widths = (8,)',
      'Value.body = @MLP',
      'Value.normalizer = @Normalize',
      'Normalize.sample_limit = 10',
  ])
  model = Value()
  assert model.normalizer.sample_limit == 10.0
  variables = init(model)
  assert top_level_layers(variables) == ['normalizer', 'body', 'value_head']
  assert variables['params']['body']['dense_0']['kernel'].shape == (3, 8)
