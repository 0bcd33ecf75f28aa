"""Recording gymnasium envs: which can render frames, the recorder, its one-line errors."""
import contextlib
import re
import warnings

import gymnasium as gym
from gymnasium.envs.registration import load_env_creator
from gymnasium.wrappers import RecordVideo
from gymnasium.wrappers.vector import RecordVideo as VectorRecordVideo

from rl.envs import mujoco_rendering
from rl.errors import ConfigError

VIDEO_INSTALL_HINT = "pip install '.[video]'"


def declared_render_modes(env_id):
  """The render modes the env's class declares; None where unknown before it is built."""
  entry_point = gym.spec(env_id).entry_point
  try:
    creator = entry_point if callable(entry_point) else load_env_creator(entry_point)
  except Exception:  # pylint: disable=broad-except
    return None  # gym.make_vec reports a bad entry point better.
  metadata = getattr(creator, 'metadata', None)
  return metadata.get('render_modes') if isinstance(metadata, dict) else None


def cannot_record(env_id, render_modes):
  """The ConfigError for an env without rgb_array frames (`render_modes`: None if unknown)."""
  declared = 'none declared' if render_modes is None else f'render_modes {list(render_modes)}'
  return ConfigError(
      f"env {env_id!r} cannot render rgb_array frames ({declared}), so it cannot be "
      "recorded; evaluate it without --video or use an env that renders rgb_array.")


@contextlib.contextmanager
def video_errors(env_id):
  """Turns missing video packages and MuJoCo render failures while recording into a ConfigError.

  Rendering (pygame for the classic-control envs) and encoding (moviepy) are
  optional packages; gymnasium's own message names its extras, not ours.
  """
  try:
    # MuJoCo's GLFW platform warns once per failed call before MuJoCo fails;
    # the ConfigError below says what to set instead.
    with warnings.catch_warnings():
      warnings.filterwarnings('ignore', module='glfw')
      yield
  except gym.error.DependencyNotInstalled as e:
    reason = re.split(r'[,;]', str(e))[0].strip() or type(e).__name__
    raise ConfigError(
        f"recording a video of {env_id!r} needs a package that is missing ({reason}); "
        f"install the video extra: {VIDEO_INSTALL_HINT}.") from None
  except Exception as e:  # pylint: disable=broad-except
    if not mujoco_rendering.is_render_error(e):
      raise
    raise ConfigError(mujoco_rendering.render_error(env_id, e)) from None


def record_first_episode(vector_env, env_id, video_folder, own):
  """`vector_env` recording copy 0's first episode as an mp4 in `video_folder`.

  `own`: the env was built by its vector_entry_point (see
  rl.envs.vector_envs.make_vector_env). Closes `vector_env` when it cannot be recorded.
  """
  try:
    if own:
      with video_errors(env_id):
        # Copy 0's frames only; its first episode starts with the first reset.
        return VectorRecordVideo(vector_env, video_folder, record_first_only=True,
                                 episode_trigger=lambda episode: episode == 0,
                                 name_prefix='eval', disable_logger=True)
    # Checked on the built env too: an entry point that is a function, not an
    # env class, declares its render modes only once called.
    if vector_env.envs[0].render_mode != 'rgb_array':
      raise cannot_record(env_id, vector_env.envs[0].metadata.get('render_modes'))
    with video_errors(env_id):
      # Sub-env 0 plays the first evaluation episode; its episode counter
      # starts at 0 with the first reset.
      vector_env.envs[0] = RecordVideo(
          vector_env.envs[0], video_folder, episode_trigger=lambda episode: episode == 0,
          name_prefix='eval', disable_logger=True)
  except BaseException:
    vector_env.close()
    raise
  return vector_env
