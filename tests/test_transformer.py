"""The Transformer body and the episode windows it reads (rl.nets.transformer, rl.envs.episode_context)."""
import pickle

import gin
import gymnasium as gym
import jax
import numpy as np
import pytest

from rl.envs import vector_envs
from rl.envs.episode_context import EpisodeContext
from rl.envs.task import RLTask
from rl.errors import ConfigError
from rl.nets.heads import PolicyAndValue
from rl.nets.normalizer import Normalize
from rl.nets.transformer import TransformerDecoder
from rl.nets.variables import init_variables
from rl.nets.variables import top_level_layers
from rl.ops.distributions import Categorical

K, F = 5, 3


def window(n_real, seed=0):
  """A window [K, F + 1] whose last n_real rows are real steps and the rest padding."""
  rows = np.random.default_rng(seed).normal(size=(K, F)).astype(np.float32)
  rows[:K - n_real] = 0.0
  flags = (np.arange(K) >= K - n_real).astype(np.float32)
  return np.concatenate([rows, flags[:, None]], axis=1)


def jitted_init(module, x):
  return jax.jit(lambda key: init_variables(module, key, x))(jax.random.PRNGKey(0))


@pytest.fixture(name='body', scope='module')
def fixture_body():
  module = TransformerDecoder(d_model=16, d_ff=32, n_heads=4, n_layers=2, max_len=8)
  x = np.stack([window(K), window(2, seed=1)])[:, None]  # [B=2, L=1, K, F + 1]
  # Jitted, the initialisation and the applications: one compile each (one per input shape),
  # where the layers run op by op compile each of their ops.
  variables = jitted_init(module, x)
  apply = jax.jit(module.apply)
  return lambda inputs: np.asarray(apply(variables, inputs))


def test_a_window_gives_the_features_of_its_newest_step(body):
  x = np.stack([window(K), window(2, seed=1), window(1, seed=2)]).reshape(1, 3, K, F + 1)
  out = body(x)
  assert out.shape == (1, 3, 16)
  # Each slice position is its own window: computed alone, the same features.
  for i in range(3):
    np.testing.assert_allclose(out[0, i], body(x[:, i:i + 1])[0, 0], rtol=1e-5, atol=1e-6)


def test_padding_is_masked_and_older_real_steps_are_read(body):
  x = window(2)[None, None]
  padded = x.copy()
  padded[..., :K - 2, :F] = 123.0  # what the padding rows hold must not matter
  np.testing.assert_allclose(body(x), body(padded), rtol=1e-6, atol=1e-6)
  older = x.copy()
  older[..., K - 2, :F] += 1.0  # the step before the current one does matter
  assert np.abs(body(x) - body(older)).max() > 1e-4


def test_only_the_past_reaches_the_newest_step(body):
  """Causality: rows are read as steps before the newest one, at their own ages."""
  x = window(K)[None, None]
  shifted = np.roll(x, 1, axis=2)  # the same rows, one step older each
  assert np.abs(body(x) - body(shifted)).max() > 1e-4


def test_it_is_a_body_of_the_joint_model_and_counts_as_one_layer():
  gin.clear_config()
  model = PolicyAndValue(Categorical(2), body=lambda: TransformerDecoder(d_model=8, d_ff=8,
                                                                           n_heads=2))
  x = np.stack([window(K)])[:, None]
  variables = jitted_init(model, x)
  logits, values = jax.jit(model.apply)(variables, x)
  assert logits.shape == (1, 1, 2) and values.shape == (1, 1, 1)
  assert top_level_layers(variables) == ['body', 'policy_head', 'value_head']


@pytest.mark.parametrize('kwargs, message', [
    (dict(d_model=10, n_heads=4), 'd_model = 10 must be a multiple of n_heads = 4'),
    (dict(dropout=0.1), 'dropout = 0.1'),
    (dict(n_layers=0), 'n_layers must be >= 1'),
])
def test_bad_settings_are_one_line_errors(kwargs, message):
  with pytest.raises(ConfigError, match=message):
    TransformerDecoder(**kwargs)


@pytest.mark.parametrize('shape, message', [
    ((1, 1, 4), 'set RLTask.context_length'),
    ((1, 1, 84, 84, 1), 'has no CNN front'),
    ((1, 1, 9, 4), 'longer than TransformerDecoder.max_len = 8'),
])
def test_inputs_that_are_not_windows_are_refused(shape, message):
  module = TransformerDecoder(d_model=8, d_ff=8, n_heads=2, max_len=8)
  with pytest.raises(ConfigError, match=message):
    module.init(jax.random.PRNGKey(0), np.zeros(shape, np.float32))


# -- the windows --------------------------------------------------------------------------

def test_the_window_holds_the_episodes_last_steps_and_restarts_at_reset():
  env = EpisodeContext(gym.make('CartPole-v1'), 3)
  assert env.observation_space.shape == (3, 5)
  first, _ = env.reset(seed=0)
  np.testing.assert_array_equal(first[:, -1], [0, 0, 1])
  np.testing.assert_array_equal(first[-1, :4], env.unwrapped.state.astype(np.float32))
  np.testing.assert_array_equal(first[:2], 0.0)
  seen = [first[-1, :4]]
  for _ in range(3):
    obs, *_ = env.step(0)
    seen.append(obs[-1, :4])
  np.testing.assert_array_equal(obs[:, :4], np.stack(seen[-3:]))
  np.testing.assert_array_equal(obs[:, -1], 1.0)
  again, _ = env.reset(seed=1)
  np.testing.assert_array_equal(again[:, -1], [0, 0, 1])


def test_autoreset_starts_a_new_window_and_the_final_one_ends_the_old_episode():
  env = vector_envs.make_vector_env('CartPole-v1', 1,
                                    wrappers=[lambda e: EpisodeContext(e, 4)])
  env.reset(seed=0)
  for _ in range(500):
    obs, _, terminated, truncated, info = env.step(np.zeros(1, np.int64))
    if terminated[0] or truncated[0]:
      break
  assert terminated[0]
  np.testing.assert_array_equal(info['final_obs'][0][:, -1], 1.0)  # a full old window
  np.testing.assert_array_equal(obs[0][:, -1], [0, 0, 0, 1])  # the new episode's first step


def test_the_window_pickles_mid_episode_and_continues_exactly():
  env = EpisodeContext(gym.make('CartPole-v1'), 4)
  env.reset(seed=0)
  env.step(1)
  copy = pickle.loads(pickle.dumps(env))
  for action in (0, 1, 0):
    np.testing.assert_array_equal(env.step(action)[0], copy.step(action)[0])


def test_context_settings_are_checked_in_one_line():
  with pytest.raises(ConfigError, match='context_length must be an integer >= 1'):
    RLTask(env='CartPole-v1', context_length=0)
  with pytest.raises(ConfigError, match='keep one'):
    RLTask(env='CartPole-v1', context_length=4, num_stacked_frames=2)
  with pytest.raises(ConfigError, match='needs vector observations'):
    RLTask(env='rl_test/ImageEnv-v0', context_length=4)
  with pytest.raises(ConfigError, match='not supported on JAX-native envs'):
    RLTask(env='gymnax:CartPole-v1', context_length=4)


class _ImageEnv(gym.Env):
  observation_space = gym.spaces.Box(0, 255, (8, 8, 1), np.uint8)
  action_space = gym.spaces.Discrete(2)

  def reset(self, *, seed=None, options=None):
    super().reset(seed=seed)
    return np.zeros((8, 8, 1), np.uint8), {}

  def step(self, action):
    return np.zeros((8, 8, 1), np.uint8), 0.0, True, False, {}


if 'rl_test/ImageEnv-v0' not in gym.registry:
  gym.register('rl_test/ImageEnv-v0', entry_point=_ImageEnv)


def test_a_normalizer_in_front_of_the_windows_is_refused():
  with pytest.raises(ConfigError, match='remove the model\'s normalizer binding'):
    PolicyAndValue(Categorical(2), body=TransformerDecoder, normalizer=Normalize)
