"""Building gymnasium environments: validated ids, vector envs, pickled state.

Every env the runner makes goes through here, so a bad env id fails once, early,
with a suggestion, before anything is written to the output folder.
"""
import difflib
import pickle

import gymnasium as gym
from gymnasium.vector import AutoresetMode

from rl.errors import ConfigError


def check_env_id(env_id):
  """Raises ConfigError naming the closest registered ids if `env_id` is unknown."""
  if not isinstance(env_id, str):
    raise ConfigError(f"RLTask.env must be a gymnasium env id string, got {env_id!r}.")
  try:
    gym.spec(env_id)
  except gym.error.Error as e:
    close = difflib.get_close_matches(env_id, list(gym.registry.keys()), n=3, cutoff=0.5)
    hint = f" Did you mean {', '.join(repr(c) for c in close)}?" if close else ""
    first_line = str(e).splitlines()[0] if str(e) else type(e).__name__
    raise ConfigError(
        f"unknown env id {env_id!r} ({first_line}).{hint} "
        "Set RLTask.env to a registered gymnasium id.") from None


def make_vector_env(env_id, n_envs, env_kwargs=None, time_limit=None):
  """A synchronous vector env of `n_envs` copies of `env_id`.

  SAME_STEP autoreset: a finished sub-env is reset inside the same `step` call
  and its last observation is handed over in info['final_obs']. That keeps one
  env step per collected transition (NEXT_STEP would spend a dummy step on
  every reset and make exact step counting awkward).
  Sync rather than async: for the small classic-control envs the step costs a
  few microseconds, far below the inter-process overhead of AsyncVectorEnv.
  """
  check_env_id(env_id)
  kwargs = dict(env_kwargs or {})
  if time_limit is not None:
    kwargs['max_episode_steps'] = int(time_limit)
  try:
    return gym.make_vec(
        env_id, num_envs=n_envs, vectorization_mode='sync',
        vector_kwargs={'autoreset_mode': AutoresetMode.SAME_STEP}, **kwargs)
  except TypeError as e:
    raise ConfigError(
        f"cannot build {env_id!r} with RLTask.env_kwargs={env_kwargs!r}: {e}. "
        "Fix or remove the offending env kwarg.") from None


def dump_env_state(vector_env):
  """Pickles the sub-envs (physics state and their RNGs) for an exact resume.

  Returns None for envs that cannot be pickled (e.g. some simulators); the
  caller then resets them on resume, which is correct but not bit-exact.
  """
  try:
    return pickle.dumps(vector_env.envs)
  except Exception:  # pylint: disable=broad-except
    return None


def load_env_state(vector_env, blob):
  vector_env.envs = pickle.loads(blob)
