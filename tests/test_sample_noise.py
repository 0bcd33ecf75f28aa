"""Sampling with noise drawn ahead gives the actions of sampling from the key."""
import functools

import gymnax
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from rl.envs import gymnax_envs as jax_envs
from rl.learner.acting import act
from rl.learner.state import ActingState
from rl.ops.distributions import Categorical
from rl.ops.distributions import Gaussian
from rl.ops.q_learning import EpsilonGreedy

KEY = jax.random.key(7)


@pytest.mark.parametrize('dist, n_inputs', [
    (Categorical(3), 3),
    (Categorical(4, shape=(2,)), 8),
    (Gaussian(shape=(2,)), 2),
    (Gaussian(shape=(3,), learn_std='separate'), 6),
])
@pytest.mark.parametrize('temperature', [1.0, 0.5, 0.0])
def test_sample_given_noise_is_sample(dist, n_inputs, temperature):
  inputs = jax.random.normal(jax.random.key(1), (5, n_inputs))
  # Both compiled, as acting runs them: op by op, XLA may round a Gaussian's
  # mean + std * noise differently from its fused form.
  given = jax.jit(lambda x, k: dist.sample_given(x, dist.noise(k, (5,)), temperature))
  expected = jax.jit(lambda x, k: dist.sample(x, k, temperature))(inputs, KEY)
  np.testing.assert_array_equal(np.asarray(given(inputs, KEY)), np.asarray(expected))


def test_categorical_sample_is_jax_categorical():
  logits = jax.random.normal(jax.random.key(2), (64, 5))
  for temperature in (1.0, 0.3):
    np.testing.assert_array_equal(
        np.asarray(Categorical(5).sample(logits, KEY, temperature)),
        np.asarray(jax.random.categorical(KEY, logits / temperature, axis=-1)))


def test_epsilon_greedy_noise_is_sample():
  dist = EpsilonGreedy(4)
  q_values = jax.random.normal(jax.random.key(3), (256, 4))
  noise = dist.noise(KEY, (256,))
  for epsilon in (0.0, 0.3, 1.0):
    expected = np.asarray(dist.sample(q_values, KEY, 1.0, epsilon))
    np.testing.assert_array_equal(
        np.asarray(dist.sample_given(q_values, noise, 1.0, epsilon)), expected)
  # Some actions explore at 0.3: the noise is really used.
  greedy = np.argmax(np.asarray(q_values), axis=-1)
  assert 0 < np.sum(np.asarray(dist.sample_given(q_values, noise, 1.0, 0.3)) != greedy) < 256


def _linear_policy(variables, obs):
  """Logits [B, 1, 2] of a fixed linear map: what acting.act's apply_fn gives."""
  return obs @ variables['params']['w']


def test_rollout_with_noise_ahead_is_step_by_step():
  """jax_envs.rollout draws every step's keys and noise first; the actions, envs and final
  keys are those of splitting and sampling step by step."""
  env, params = gymnax.make('CartPole-v1')
  dist = Categorical(2)
  act_fn = functools.partial(act, _linear_policy, dist, lambda out: out, temperature=1.0,
                             update=False)
  policy = {'w': jnp.asarray(np.random.default_rng(0).normal(size=(4, 2)), jnp.float32)}
  n_envs, n_steps = 3, 40
  acting = ActingState(jax.random.key(11), {})
  carry = jax_envs.reset(env, params, jax.random.key(12), n_envs, np.float32)
  space = jax_envs.gymnasium_space(env.action_space(params))
  acting_after, carry_after, record = jax.jit(
      lambda acting, carry: jax_envs.rollout(env, params, space, act_fn, dist.noise, policy,
                                             acting, carry, (), n_steps))(acting, carry)

  step = jax.vmap(env.step, in_axes=(0, 0, 0, None))
  actions, episodes_ended = [], 0
  for _ in range(n_steps):
    a, _, acting = act_fn(policy, acting, carry.obs, ())
    key, step_key = jax.random.split(carry.key)
    obs, state, _, terminated, truncated, _ = step(
        jax.random.split(step_key, n_envs), carry.state, a, params)
    episodes_ended += int(jnp.sum(terminated | truncated))
    carry = carry._replace(state=state, obs=obs, key=key)
    actions.append(np.asarray(a))
  np.testing.assert_array_equal(np.asarray(record.action), np.stack(actions))
  # The physics compiled into a loop may round differently from step by step.
  np.testing.assert_allclose(np.asarray(carry_after.obs), np.asarray(carry.obs), rtol=1e-5,
                             atol=1e-6)
  assert int(np.sum(np.asarray(record.ended))) == episodes_ended > 0
  np.testing.assert_array_equal(jax.random.key_data(acting_after.key),
                                jax.random.key_data(acting.key))
  np.testing.assert_array_equal(jax.random.key_data(carry_after.key),
                                jax.random.key_data(carry.key))
