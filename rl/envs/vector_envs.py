"""Building gymnasium envs and vector envs from checked ids, recorded or not.

Every gymnasium env the runner steps is built here: its id checked
(rl.envs.registry), its missing packages told as one line naming our extra.
"""
import contextlib
import re

import gymnasium as gym
from gymnasium.vector import AutoresetMode

from rl.envs import packages
from rl.envs import video
from rl.envs.packages import install_hint
from rl.envs.registry import check_env_id
from rl.envs.registry import extra_for
from rl.errors import ConfigError


def make_vector_env(env_id, n_envs, env_kwargs=None, time_limit=None, video_folder=None,
                    wrappers=(), vectorized=False):
  """A synchronous vector env of `n_envs` copies of `env_id`.

  Each copy is `gymnasium.make(env_id, **env_kwargs)` (with `time_limit` as
  its max_episode_steps) wrapped in `wrappers`, functions env -> wrapped env,
  innermost first (rl.envs.wrappers.env_wrappers).

  SAME_STEP autoreset: a finished sub-env is reset inside the same `step` call
  and its last observation is handed over in info['final_obs']. That keeps one
  env step per collected transition (NEXT_STEP would spend a dummy step on
  every reset and make exact step counting awkward).
  Sync rather than async: for the small classic-control envs the step costs a
  few microseconds, far below the inter-process overhead of AsyncVectorEnv.

  With `video_folder`, the envs are built with render_mode='rgb_array' and
  gymnasium's RecordVideo records the first episode of sub-env 0 (from its
  first reset to its next one) as an mp4 in that folder; no other sub-env or
  episode is recorded. The file is written when sub-env 0 resets (the
  autoreset at the end of its episode) or, if the episode is still running,
  when the vector env is closed. Rendering reads the env state without
  changing it, so the episodes play exactly as they would unrecorded.

  With `vectorized`, an env that comes with its own vectorised implementation
  (gymnasium's vector_entry_point: CartPole's CartPoleVectorEnv steps all
  copies in one set of numpy operations) is built that way when no wrapper asks for the copies one by one; with
  `video_folder`, gymnasium's vector RecordVideo then records copy 0's first
  episode. Such an env resets a finished copy on the next step rather than
  within the same one, and draws every copy's reset from one generator seeded
  once; its state is not one a checkpoint saves. That suits evaluation, whose
  episodes are seeded afresh each time and stop counting at their end, not
  training collection.

  Raises:
    ConfigError: unknown env id, a missing package the env needs, bad env
      kwargs, or (with `video_folder`) an env that cannot render rgb_array
      frames or a missing video package.
  """
  env_id = check_env_id(env_id)
  own = vectorized and not wrappers and gym.spec(env_id).vector_entry_point is not None
  if extra_for(env_id) == 'atari':
    _quiet_ale()
  kwargs = dict(env_kwargs or {})
  if time_limit is not None:
    kwargs['max_episode_steps'] = int(time_limit)
  if video_folder is not None:
    modes = video.declared_render_modes(env_id)
    if modes is not None and 'rgb_array' not in modes:
      raise video.cannot_record(env_id, modes)
    kwargs['render_mode'] = 'rgb_array'
  mode = (dict(vectorization_mode='vector_entry_point') if own else
          dict(vectorization_mode='sync', wrappers=list(wrappers),
               vector_kwargs={'autoreset_mode': AutoresetMode.SAME_STEP}))
  with _build_errors(env_id, env_kwargs, recording=video_folder is not None):
    vector_env = gym.make_vec(env_id, num_envs=n_envs, **mode, **kwargs)
  if video_folder is None:
    return vector_env
  return video.record_first_episode(vector_env, env_id, video_folder, own)


def make_env(env_id, env_kwargs=None, time_limit=None, wrappers=()):
  """One copy of `env_id` as a sub-env of `make_vector_env` is: `gymnasium.make(env_id,
  **env_kwargs)` (with `time_limit` as its max_episode_steps) wrapped in `wrappers`.

  Raises:
    ConfigError: as `make_vector_env` (unknown id, missing package, bad env kwargs).
  """
  env_id = check_env_id(env_id)
  if extra_for(env_id) == 'atari':
    _quiet_ale()
  kwargs = dict(env_kwargs or {})
  if time_limit is not None:
    kwargs['max_episode_steps'] = int(time_limit)
  with _build_errors(env_id, env_kwargs, recording=False):
    env = gym.make(env_id, **kwargs)
  for wrap in wrappers:
    env = wrap(env)
  return env


@contextlib.contextmanager
def _build_errors(env_id, env_kwargs, recording):
  """Turns gymnasium's errors while building `env_id` into one-line ConfigErrors."""
  try:
    yield
  except gym.error.DependencyNotInstalled as e:
    raise _missing_package(env_id, e) from None
  except TypeError as e:
    if recording and 'render_mode' in str(e):
      # An env that declares no render_modes and takes no render_mode.
      raise video.cannot_record(env_id, None) from None
    raise ConfigError(
        f"cannot build {env_id!r} with RLTask.env_kwargs={env_kwargs!r}: {e}. "
        "Fix or remove the offending env kwarg.") from None


def _missing_package(env_id, error):
  """The ConfigError for gymnasium's DependencyNotInstalled while building `env_id`.

  e.g. LunarLander-v3 without box2d. gymnasium's message names its own extras
  (and swig for box2d, which our box2d wheel does not need); where the env
  comes with one of ours, the line names that instead.
  """
  extra = extra_for(env_id)
  # gymnasium says "not installed" for any ImportError; one of an installed package is told as such.
  failing = extra and packages.installed_but_failing(extra, f'env {env_id!r}')
  if failing:
    return ConfigError(failing)
  if extra is None:
    # gymnasium's message names the missing package and its pip command.
    return ConfigError(f"env {env_id!r} needs a package that is not installed: "
                       f"{' '.join(str(error).split()).rstrip('.')}.")
  reason = re.split(r'[,;(]', str(error))[0].strip() or type(error).__name__
  return ConfigError(f"env {env_id!r} needs a package that is not installed ({reason}); "
                     f"install the {extra} extra: {install_hint(extra)}.")


def _quiet_ale():
  """Keeps the ALE from printing its banner on stderr, where errors must stand alone on one line."""
  import ale_py  # pylint: disable=import-outside-toplevel
  ale_py.ALEInterface.setLoggerMode(ale_py.LoggerMode.Warning)
