"""Partially observed env variants: envs whose observations hide part of the state.

'CartPoleNoVel-v1' is CartPole-v1 observed as [cart position, pole angle]
only. One observation then says nothing of the velocities, so a policy that
sees one observation cannot balance the pole well, while a sequence policy
with a context window can infer them: a small memory task.
'gymnax:CartPoleNoVel-v1' is the same env on gymnax's CartPole, for the
JAX-native backend (rl.envs.gymnax_envs resolves it through GYMNAX_ENVS).

Importing this module registers the gymnasium id; rl.envs.registry imports it,
so every env id the runner checks can name it.
"""
import gymnasium as gym
import numpy as np

CARTPOLE_NO_VEL = 'CartPoleNoVel-v1'
# CartPole's observation is [x, x_dot, theta, theta_dot]; these stay visible.
CARTPOLE_KEPT = (0, 2)


class ObservationSubset(gym.ObservationWrapper):
  """Keeps the features at `indices` of a 1-D Box observation, in that order.

  It holds the indices as an array (no functions), so it pickles with the env
  it wraps, as the runner's saved sub-envs need for an exact resume.
  """

  def __init__(self, env, indices):
    """Wraps `env`.

    Args:
      env: a gymnasium env with a 1-D Box observation space.
      indices: the positions of the observation's features to keep.

    Raises:
      ValueError: the observation space is not a 1-D Box, or an index is outside it.
    """
    super().__init__(env)
    space = env.observation_space
    if not isinstance(space, gym.spaces.Box) or len(space.shape) != 1:
      raise ValueError(f'ObservationSubset needs a 1-D Box observation space, got {space}.')
    self._indices = np.asarray(indices, dtype=np.intp)
    if self._indices.ndim != 1 or np.any((self._indices < 0) | (self._indices >= space.shape[0])):
      raise ValueError(f'indices {list(indices)} do not select features of {space}.')
    self.observation_space = gym.spaces.Box(space.low[self._indices], space.high[self._indices],
                                            dtype=space.dtype)

  def observation(self, observation):
    return observation[self._indices]


def make_cartpole_no_vel(**kwargs):
  """CartPole whose observations are [x, theta]: the entry point of 'CartPoleNoVel-v1'.

  Args:
    **kwargs: CartPoleEnv's keyword arguments (e.g. render_mode), as gymnasium.make passes them.

  Returns:
    The wrapped env (gymnasium.make adds the time limit and its checks around it).
  """
  from gymnasium.envs.classic_control import cartpole  # pylint: disable=import-outside-toplevel
  return ObservationSubset(cartpole.CartPoleEnv(**kwargs), CARTPOLE_KEPT)


def register():
  """Registers 'CartPoleNoVel-v1' with gymnasium, once; another call leaves it as it is."""
  if CARTPOLE_NO_VEL not in gym.registry:
    gym.register(CARTPOLE_NO_VEL, entry_point=f'{__name__}:make_cartpole_no_vel',
                 max_episode_steps=500, reward_threshold=475.0)


class GymnaxObservationSubset:
  """A gymnax env whose observations (also info['final_observation']) keep `indices` only.

  The state and the dynamics stay the wrapped env's, so episodes, rewards and
  ends are the same for the same keys and actions; indexing with a constant
  array traces into a gather, so it costs nothing outside the compiled step.
  """

  def __init__(self, env, indices):
    self._env = env
    self._indices = np.asarray(indices, dtype=np.intp)

  @property
  def default_params(self):
    return self._env.default_params

  @property
  def name(self):
    return self._env.name

  def action_space(self, params=None):
    return self._env.action_space(params)

  def observation_space(self, params):
    space = self._env.observation_space(params)
    low, high = (np.broadcast_to(np.asarray(bound), space.shape)[self._indices]
                 for bound in (space.low, space.high))
    return type(space)(low, high, (len(self._indices),), space.dtype)

  def reset(self, key, params=None):
    obs, state = self._env.reset(key, params)
    return obs[..., self._indices], state

  def step(self, key, state, action, params=None):
    obs, state, reward, terminated, truncated, info = self._env.step(key, state, action, params)
    info = dict(info, final_observation=info['final_observation'][..., self._indices])
    return obs[..., self._indices], state, reward, terminated, truncated, info


def gymnax_cartpole_no_vel():
  """(env, params) of 'gymnax:CartPoleNoVel-v1': gymnax's CartPole-v1 observed as [x, theta]."""
  import gymnax  # pylint: disable=import-outside-toplevel
  env, params = gymnax.make('CartPole-v1')
  return GymnaxObservationSubset(env, CARTPOLE_KEPT), params


# The JAX-native variants, by the name that follows 'gymnax:' in an env id.
GYMNAX_ENVS = {CARTPOLE_NO_VEL: gymnax_cartpole_no_vel}

register()
