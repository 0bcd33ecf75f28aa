"""An evaluation's step on JAX-native envs: gymnax's step without its auto-reset."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from rl.envs import gymnax_envs as jax_envs

pytest.importorskip('gymnax')


@pytest.mark.parametrize('env_id', ['gymnax:CartPole-v1', 'gymnax:Breakout-MinAtar',
                                    'gymnax:Asterix-MinAtar'])
def test_a_running_episode_steps_as_under_gymnax_step(env_id):
  # Random actions over enough steps that episodes end (CartPole's in tens of
  # steps, Breakout's at a missed ball) and go on after gymnax's reset;
  # Asterix draws its enemies from the step's key.
  env, params = jax_envs.make(env_id)
  n_envs, n_actions = 8, env.action_space(params).n
  plain = jax.jit(jax.vmap(env.step, in_axes=(0, 0, 0, None)))
  once = jax.jit(jax.vmap(jax_envs.step_without_reset(env), in_axes=(0, 0, 0, None)))

  # A step's keys and actions in one compiled call, and the steps read back once at the end:
  # eager ops and read-backs of every state leaf at each step are most of the loop's time.
  @jax.jit
  def draw(key):
    key, action_key, step_key = jax.random.split(key, 3)
    actions = jax.random.randint(action_key, (n_envs,), 0, n_actions)
    return key, actions, jax.random.split(step_key, n_envs)

  key = jax.random.key(3)
  key, reset_key = jax.random.split(key)
  _, state = jax.jit(jax.vmap(env.reset, in_axes=(0, None)))(
      jax.random.split(reset_key, n_envs), params)
  plain_steps, once_steps = [], []
  for _ in range(300):
    key, actions, step_keys = draw(key)
    _, next_state, reward, terminated, truncated, info = plain(step_keys, state, actions, params)
    plain_steps.append((info['final_observation'], next_state, reward, terminated, truncated))
    once_steps.append(once(step_keys, state, actions, params))
    state = next_state
  stack = lambda steps: jax.tree_util.tree_map(  # noqa: E731  ([300, n_envs, ...] each)
      lambda *x: np.stack(x), *jax.device_get(steps))
  final_obs, next_state, reward, terminated, truncated = stack(plain_steps)
  obs_once, state_once, reward_once, terminated_once, truncated_once = stack(once_steps)
  np.testing.assert_array_equal(reward_once, reward)
  np.testing.assert_array_equal(terminated_once, terminated)
  np.testing.assert_array_equal(truncated_once, truncated)
  # The observation after the step, before gymnax's reset replaces it at an end.
  np.testing.assert_array_equal(obs_once, final_obs)
  running = ~(terminated | truncated)
  for leaf_once, leaf in zip(jax.tree_util.tree_leaves(state_once),
                             jax.tree_util.tree_leaves(next_state)):
    np.testing.assert_array_equal(leaf_once[running], leaf[running])
  assert np.sum(~running) >= 2


def test_an_env_with_its_own_step_keeps_it():
  class OwnStep:
    def step(self, key, state, action, params):
      return 'obs', state + action, 1.0, True, False, {}
  step = jax_envs.step_without_reset(OwnStep())
  assert step(None, 1, 2, None) == ('obs', 3, 1.0, True, False)


def test_play_counts_each_episode_to_its_end():
  # A policy that always pushes right ends CartPole's episodes within tens of
  # steps; each return is its episode's length (reward 1 a step), all of them
  # under the episode cap, though the loop runs until the longest ends.
  env, params = jax_envs.make('gymnax:CartPole-v1')

  def push_right(policy_params, acting, obs, sample_args):
    return jnp.ones(obs.shape[0], jnp.int32), None, acting

  returns = jax_envs.play(env, params, env.action_space(params), jnp.float32, push_right, None,
                          jnp.zeros(()), jax.random.key(0), None, n_episodes=6, max_steps=500)
  returns = np.asarray(returns)
  assert returns.shape == (6,)
  assert np.all((returns >= 8) & (returns < 60)) and np.all(returns == np.round(returns))
