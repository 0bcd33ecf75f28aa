"""Building gymnasium environments: validated ids, vector envs, pickled state.

Every env the runner makes goes through here, so a bad env id fails once, early,
with a suggestion, before anything is written to the output folder.
"""
import collections
import contextlib
import difflib
import importlib.util
import pickle
import re

import gymnasium as gym
from gymnasium.envs.registration import load_env_creator
from gymnasium.envs.registration import parse_env_id
from gymnasium.vector import AutoresetMode
from gymnasium.wrappers import RecordVideo

from rl.errors import ConfigError

VIDEO_INSTALL_HINT = "pip install '.[video]'"

# Env namespaces that a package registers when it is imported: namespace ->
# (its pip name, its module).
NAMESPACE_PACKAGES = {'ALE': ('ale-py', 'ale_py'), 'MinAtar': ('minatar', 'minatar')}


def check_env_id(env_id):
  """Raises ConfigError if `env_id` is unknown: close ids of its namespace, or its package."""
  if not isinstance(env_id, str):
    raise ConfigError(f"RLTask.env must be a gymnasium env id string, got {env_id!r}.")
  try:
    gym.spec(env_id)
  except gym.error.NamespaceNotFound:
    raise ConfigError(_unknown_namespace(env_id)) from None
  except gym.error.Error as e:
    close = _similar_ids(env_id)
    hint = f" Did you mean {', '.join(repr(c) for c in close)}?" if close else ""
    first_line = str(e).splitlines()[0] if str(e) else type(e).__name__
    raise ConfigError(
        f"unknown env id {env_id!r} ({first_line}).{hint} "
        "Set RLTask.env to a registered gymnasium id.") from None


def _similar_ids(env_id):
  """Registered ids in `env_id`'s namespace whose names are close to its name.

  Matched by name, not by whole id: the version suffix alone would make
  'Pong-v5' look like 'Ant-v5', and an id of another namespace is another
  package's env. Each close name is given in the asked version if it has it,
  else in its newest.
  """
  try:
    namespace, name, version = parse_env_id(env_id)
  except gym.error.Error:  # malformed: compare the whole string with names
    namespace, name, version = None, env_id, None
  specs = collections.defaultdict(list)  # lower-cased name -> its specs
  for spec in gym.registry.values():
    if spec.namespace == namespace:
      specs[spec.name.lower()].append(spec)
  close = difflib.get_close_matches(name.lower(), list(specs), n=3, cutoff=0.6)
  ids = []
  for key in close:
    same_version = [s for s in specs[key] if s.version == version]
    newest = max(specs[key], key=lambda s: -1 if s.version is None else s.version)
    ids.append((same_version[0] if same_version else newest).id)
  return ids


def _unknown_namespace(env_id):
  """The error line for an id whose namespace nothing registered: which package would."""
  namespace = parse_env_id(env_id)[0]
  if namespace not in NAMESPACE_PACKAGES:
    known = sorted({spec.namespace for spec in gym.registry.values() if spec.namespace})
    return (f"unknown env id {env_id!r}: no installed package registers the env namespace "
            f"{namespace!r} (registered: {', '.join(known)}); install the package that "
            "does and import it in the gin config, or set RLTask.env to a registered id.")
  pip_name, module = NAMESPACE_PACKAGES[namespace]
  if importlib.util.find_spec(module) is None:
    return (f"unknown env id {env_id!r}: the env namespace {namespace!r} is registered by "
            f"the {pip_name} package, which is not installed; pip install {pip_name}.")
  return (f"unknown env id {env_id!r}: the env namespace {namespace!r} is registered by "
          f"the {pip_name} package, which is installed but not imported; add the line "
          f"`import {module}` to the gin config.")


def make_vector_env(env_id, n_envs, env_kwargs=None, time_limit=None, video_folder=None):
  """A synchronous vector env of `n_envs` copies of `env_id`.

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

  Raises:
    ConfigError: unknown env id, a missing package the env needs, bad env
      kwargs, or (with `video_folder`) an env that cannot render rgb_array
      frames or a missing video package.
  """
  check_env_id(env_id)
  kwargs = dict(env_kwargs or {})
  if time_limit is not None:
    kwargs['max_episode_steps'] = int(time_limit)
  if video_folder is not None:
    modes = _declared_render_modes(env_id)
    if modes is not None and 'rgb_array' not in modes:
      raise _cannot_record(env_id, modes)
    kwargs['render_mode'] = 'rgb_array'
  try:
    vector_env = gym.make_vec(
        env_id, num_envs=n_envs, vectorization_mode='sync',
        vector_kwargs={'autoreset_mode': AutoresetMode.SAME_STEP}, **kwargs)
  except gym.error.DependencyNotInstalled as e:
    # e.g. LunarLander-v3 without box2d. gymnasium's message names the
    # missing package and the pip command that installs it.
    raise ConfigError(f"env {env_id!r} needs a package that is not installed: "
                      f"{' '.join(str(e).split()).rstrip('.')}.") from None
  except TypeError as e:
    if video_folder is not None and 'render_mode' in str(e):
      # An env that declares no render_modes and takes no render_mode.
      raise _cannot_record(env_id, None) from None
    raise ConfigError(
        f"cannot build {env_id!r} with RLTask.env_kwargs={env_kwargs!r}: {e}. "
        "Fix or remove the offending env kwarg.") from None
  if video_folder is None:
    return vector_env
  try:
    # Checked on the built env too: an entry point that is a function, not an
    # env class, declares its render modes only once called.
    if vector_env.envs[0].render_mode != 'rgb_array':
      raise _cannot_record(env_id, vector_env.envs[0].metadata.get('render_modes'))
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


def _declared_render_modes(env_id):
  """The render modes the env's class declares; None where unknown before it is built."""
  entry_point = gym.spec(env_id).entry_point
  try:
    creator = entry_point if callable(entry_point) else load_env_creator(entry_point)
  except Exception:  # pylint: disable=broad-except
    return None  # gym.make_vec reports a bad entry point better.
  metadata = getattr(creator, 'metadata', None)
  return metadata.get('render_modes') if isinstance(metadata, dict) else None


def _cannot_record(env_id, render_modes):
  """The ConfigError for an env without rgb_array frames (`render_modes`: None if unknown)."""
  declared = 'none declared' if render_modes is None else f'render_modes {list(render_modes)}'
  return ConfigError(
      f"env {env_id!r} cannot render rgb_array frames ({declared}), so it cannot be "
      "recorded; evaluate it without --video or use an env that renders rgb_array.")


@contextlib.contextmanager
def video_errors(env_id):
  """Turns gymnasium's DependencyNotInstalled while recording into a ConfigError.

  Rendering (pygame for the classic-control envs) and encoding (moviepy) are
  optional packages; gymnasium's own message names its extras, not ours.
  """
  try:
    yield
  except gym.error.DependencyNotInstalled as e:
    reason = re.split(r'[,;]', str(e))[0].strip() or type(e).__name__
    raise ConfigError(
        f"recording a video of {env_id!r} needs a package that is missing ({reason}); "
        f"install the video extra: {VIDEO_INSTALL_HINT}.") from None


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
