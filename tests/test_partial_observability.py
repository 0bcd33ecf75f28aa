"""CartPoleNoVel-v1 and gymnax:CartPoleNoVel-v1: CartPole observed as [x, theta], all else equal."""
import pickle
import subprocess
import sys

import gymnasium as gym
import jax
import numpy as np
import pytest

from rl.envs import env_state
from rl.envs import gymnax_envs
from rl.envs import partial_observability
from rl.envs import vector_envs
from rl.metrics import read_metrics
from run_helpers import ROOT
from run_helpers import cli

ENV_ID = 'CartPoleNoVel-v1'


def position_and_angle(state):
  """[x, theta] of a CartPole state [x, x_dot, theta, theta_dot], as CartPole observes it."""
  return np.asarray(state, np.float32)[[0, 2]]


def actions(n, seed=0):
  return np.random.default_rng(seed).integers(0, 2, n)


def test_the_observation_is_position_and_angle_of_the_state():
  env = gym.make(ENV_ID)
  obs, _ = env.reset(seed=5)
  np.testing.assert_array_equal(obs, position_and_angle(env.unwrapped.state))
  for action in actions(8):
    obs, *_ = env.step(action)
    np.testing.assert_array_equal(obs, position_and_angle(env.unwrapped.state))
    assert obs.dtype == np.float32 and obs.shape == (2,)


def test_the_space_keeps_the_bounds_of_position_and_angle():
  space, full = gym.make(ENV_ID).observation_space, gym.make('CartPole-v1').observation_space
  assert space.shape == (2,) and space.dtype == full.dtype
  np.testing.assert_array_equal(space.low, full.low[[0, 2]])
  np.testing.assert_array_equal(space.high, full.high[[0, 2]])
  spec = gym.spec(ENV_ID)
  assert spec.max_episode_steps == 500 and spec.reward_threshold == 475


def test_episodes_are_cartpoles_for_the_same_seed_and_actions():
  hidden, full = gym.make(ENV_ID), gym.make('CartPole-v1')
  obs, _ = hidden.reset(seed=1)
  full_obs, _ = full.reset(seed=1)
  n_episodes = 0
  for action in actions(300, seed=1):
    np.testing.assert_array_equal(obs, full_obs[[0, 2]])
    obs, reward, terminated, truncated, _ = hidden.step(action)
    full_obs, *expected = full.step(action)
    assert [reward, terminated, truncated] == expected[:3]
    if terminated or truncated:
      n_episodes += 1
      obs, _ = hidden.reset()
      full_obs, _ = full.reset()
  assert n_episodes > 5  # random actions end a CartPole episode in about 20 steps


def test_a_long_episode_is_truncated_at_500_steps():
  hidden, full = gym.make(ENV_ID), gym.make('CartPole-v1')
  hidden.reset(seed=0)
  full.reset(seed=0)
  for _ in range(500):
    # Pushing the way the pole falls (read from the hidden state) balances it.
    action = int(np.dot([0.1, 0.5, 10, 2], hidden.unwrapped.state) > 0)
    _, reward, terminated, truncated, _ = hidden.step(action)
    assert (reward, terminated, truncated) == full.step(action)[1:4]
  assert truncated and not terminated


def test_the_env_pickles_mid_episode_and_plays_on_identically():
  env = gym.make(ENV_ID)
  env.reset(seed=2)
  for action in actions(5, seed=2):
    env.step(action)
  copy = pickle.loads(pickle.dumps(env))
  for action in actions(200, seed=3):
    a, b = env.step(action), copy.step(action)
    np.testing.assert_array_equal(a[0], b[0])
    assert a[1:4] == b[1:4]
    if a[2] or a[3]:
      np.testing.assert_array_equal(env.reset()[0], copy.reset()[0])


def test_the_runner_saves_its_sub_envs():
  vector_env = vector_envs.make_vector_env(ENV_ID, 2)
  vector_env.reset(seed=0)
  blob = env_state.dump_env_state(vector_env)
  assert blob is not None
  state = vector_env.envs[1].unwrapped.state
  np.testing.assert_array_equal(pickle.loads(blob)[1].unwrapped.state, state)


def test_bad_indices_are_refused():
  with pytest.raises(ValueError, match='do not select'):
    partial_observability.ObservationSubset(gym.make('CartPole-v1'), (0, 4))


def test_registering_again_or_importing_anew_is_quiet():
  # A fresh process: rl's env registry (every id the runner checks) registers the id.
  code = ('import importlib, gymnasium as gym\n'
          'from rl.envs import registry\n'
          f"assert registry.check_env_id('{ENV_ID}') == '{ENV_ID}'\n"
          'from rl.envs import partial_observability as p\n'
          'p.register(); importlib.reload(p)\n'
          f"gym.make('{ENV_ID}').reset(seed=0)\n")
  result = subprocess.run([sys.executable, '-W', 'error', '-c', code], cwd=ROOT,
                          capture_output=True, text=True, timeout=120, check=False)
  assert result.returncode == 0, result.stderr
  assert not result.stderr, result.stderr


# -- gymnax:CartPoleNoVel-v1 --------------------------------------------------------------


def gymnax_state_position_and_angle(state):
  return np.array([state.x, state.theta], np.float32)


def test_gymnax_variant_observes_position_and_angle_and_plays_gymnax_cartpole():
  env, params = gymnax_envs.make('gymnax:' + ENV_ID)
  full, full_params = gymnax_envs.make('gymnax:CartPole-v1')
  space = gymnax_envs.gymnasium_space(env.observation_space(params))
  full_space = gymnax_envs.gymnasium_space(full.observation_space(full_params))
  assert space.shape == (2,) and space.dtype == full_space.dtype
  np.testing.assert_array_equal(space.low, full_space.low[[0, 2]])
  np.testing.assert_array_equal(space.high, full_space.high[[0, 2]])
  assert gymnax_envs.gymnasium_space(env.action_space(params)) == gym.spaces.Discrete(2)

  key = jax.random.key(4)
  obs, state = env.reset(key, params)
  full_obs, full_state = full.reset(key, full_params)
  step, full_step = jax.jit(env.step), jax.jit(full.step)
  n_episodes = 0
  for t, action in enumerate(actions(200, seed=4)):
    np.testing.assert_array_equal(obs, gymnax_state_position_and_angle(state))
    np.testing.assert_array_equal(obs, np.asarray(full_obs)[[0, 2]])
    key_t = jax.random.fold_in(key, t)
    obs, state, reward, terminated, truncated, info = step(key_t, state, action, params)
    full_obs, full_state, *expected, full_info = full_step(key_t, full_state, action, full_params)
    jax.tree_util.tree_map(np.testing.assert_array_equal, state, full_state)
    assert [float(reward), bool(terminated), bool(truncated)] == [
        float(expected[0]), bool(expected[1]), bool(expected[2])]
    np.testing.assert_array_equal(info['final_observation'],
                                  np.asarray(full_info['final_observation'])[[0, 2]])
    n_episodes += bool(terminated | truncated)
  assert n_episodes > 5


def test_rl_run_trains_on_it_for_two_epochs(tmp_path):
  out = tmp_path / 'run'
  result = cli('--config_file=configs/ppo_cartpole.gin', f'--output_dir={out}',
               f"--config=RLTask.env = '{ENV_ID}'", '--config=train_rl.n_epochs = 2',
               '--config=PPO.n_eval_episodes = 2')
  assert result.returncode == 0, result.stderr
  assert [r['epoch'] for r in read_metrics(str(out))] == [1, 2]
