"""EpisodeContext: each observation is the window of the episode's last K observations.

What sequence bodies (rl.nets.transformer) read, made by RLTask.context_length = K.
The window is an array [K, F + 1], oldest step first: row K - 1 is the current
observation, and the last column is 1 on the episode's real steps and 0 on
the zero rows that pad the window while the episode is younger than K steps.
It restarts at every reset, gymnasium's autoreset included, so a window
never reaches into the previous episode.

The window is the observation itself: the task stores it with each step, and
training reads the very input the policy acted on (K times the storage of
one observation per step). Being the wrapper's state, it is pickled with the
sub-env, so a resume mid-episode continues the window exactly.
"""
import gymnasium as gym
import numpy as np

from rl.errors import ConfigError


def check_context_length(context_length, num_stacked_frames):
  """Refuses a context length that is not None or an integer >= 1, or one beside frame stacking."""
  if context_length is None:
    return
  if isinstance(context_length, bool) or not isinstance(context_length, int) or (
      context_length < 1):
    raise ConfigError(f'RLTask.context_length must be an integer >= 1 (or None: no context), '
                      f'got {context_length!r}.')
  if num_stacked_frames != 1:
    raise ConfigError(
        f'RLTask.context_length = {context_length} and RLTask.num_stacked_frames = '
        f'{num_stacked_frames} both make an observation of several steps; keep one.')


def window_space(space, n):
  """The Box of windows of `n` observations of the 1-D Box `space`, with the flag column."""
  low = np.append(np.asarray(space.low).reshape(-1), 0.0).astype(np.float32)
  high = np.append(np.asarray(space.high).reshape(-1), 1.0).astype(np.float32)
  return gym.spaces.Box(np.tile(low, (n, 1)), np.tile(high, (n, 1)), dtype=np.float32)


class EpisodeContext(gym.ObservationWrapper):
  """Observations [n, F + 1]: the episode's last n observations and a real-step flag."""

  def __init__(self, env, n):
    super().__init__(env)
    space = env.observation_space
    if not isinstance(space, gym.spaces.Box) or len(space.shape) != 1:
      env_id = env.spec.id if env.spec else type(env.unwrapped).__name__
      raise ConfigError(
          f'RLTask.context_length = {n} needs vector observations (a 1-D Box), but {env_id!r} '
          f'has {space}; images would need a CNN front, which the Transformer body has not.')
    self.observation_space = window_space(space, n)
    self._window = np.zeros(self.observation_space.shape, np.float32)

  def reset(self, *, seed=None, options=None):
    self._window[:] = 0.0
    return super().reset(seed=seed, options=options)

  def observation(self, observation):
    self._window[:-1] = self._window[1:]
    self._window[-1, :-1] = observation
    self._window[-1, -1] = 1.0
    return self._window.copy()
