"""Building gymnasium environments: validated ids, vector envs, pickled state.

Every env the runner makes goes through here, so a bad env id fails once, early,
with a suggestion, before anything is written to the output folder.
"""
import collections
import contextlib
import difflib
import importlib
import importlib.util
import io
import pickle
import re
import sys
import warnings

import gymnasium as gym
import numpy as np
from gymnasium.envs.registration import load_env_creator
from gymnasium.envs.registration import parse_env_id
from gymnasium.vector import AutoresetMode
from gymnasium.utils import EzPickle
from gymnasium.wrappers import RecordVideo
from gymnasium.wrappers.vector import RecordVideo as VectorRecordVideo

from rl.envs import mujoco_rendering
from rl.envs import packages
from rl.envs.packages import install_hint
from rl.errors import ConfigError

VIDEO_INSTALL_HINT = "pip install '.[video]'"

# The extras of setup.py that install the packages of optional envs, keyed by
# the module their entry points live in (the first match of a prefix wins).
ENTRY_POINT_EXTRAS = {
    'ale_py': 'atari',
    'minatar': 'minatar',
    'gymnasium.envs.box2d': 'box2d',
    'gymnasium.envs.mujoco': 'mujoco',
}

# Env namespaces that an optional package registers: namespace -> (the extra
# that installs it, the module to import, and the function of that module that
# registers the envs, or None where importing it does). gymnasium 1.x loads no
# plugins, so the first use of a namespace imports its package here: a gin
# config needs no `import ale_py`.
NAMESPACE_PACKAGES = {
    'ALE': ('atari', 'ale_py', None),
    'MinAtar': ('minatar', 'minatar.gym', 'register_envs'),
}


def check_env_id(env_id):
  """`registered_id(env_id)`; ConfigError if unknown: close ids of its namespace, or its package."""
  if not isinstance(env_id, str):
    raise ConfigError(f"RLTask.env must be a gymnasium env id string, got {env_id!r}.")
  env_id = registered_id(env_id)
  _register_namespace(env_id)
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
  return env_id


def registered_id(env_id):
  """The id of gymnasium's 'module:EnvId' form once `module` is imported; other ids as they are.

  gymnasium.make imports the module (which registers its envs) before it looks
  the id up; gymnasium.spec takes the id alone. A module that fails as it runs
  keeps its traceback: the error is in its code.
  """
  module, colon, name = env_id.partition(':')
  if not colon:
    return env_id
  try:
    importlib.import_module(module)
  except ModuleNotFoundError as e:
    raise ConfigError(
        f'RLTask.env = {env_id!r}: the module {module!r} cannot be imported ({e}); put the '
        "folder holding it on PYTHONPATH or install its package (JAX-native ids start with "
        "'gymnax:').") from None
  return name


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


def _register_namespace(env_id):
  """Imports the package that registers `env_id`'s namespace, where we know it and it is unused.

  Raises:
    ConfigError: the package is not installed (the line names its extra) or fails to
      import (the line quotes why).
  """
  try:
    namespace = parse_env_id(env_id)[0]
  except gym.error.Error:
    return  # malformed: check_env_id says so
  if namespace not in NAMESPACE_PACKAGES or any(
      spec.namespace == namespace for spec in gym.registry.values()):
    return
  extra, module, register = NAMESPACE_PACKAGES[namespace]
  if importlib.util.find_spec(module.split('.')[0]) is None:
    raise ConfigError(
        f"env {env_id!r} needs the {extra} extra, which is not installed (its package "
        f"registers the env namespace {namespace!r}); {install_hint(extra)}.")
  package = packages.import_module(module, extra, f'env {env_id!r}')
  if register is not None:
    getattr(package, register)()


def _unknown_namespace(env_id):
  """The error line for an id whose namespace nothing registered: which package would."""
  namespace = parse_env_id(env_id)[0]
  if namespace not in NAMESPACE_PACKAGES:
    known = sorted({spec.namespace for spec in gym.registry.values() if spec.namespace})
    return (f"unknown env id {env_id!r}: no installed package registers the env namespace "
            f"{namespace!r} (registered: {', '.join(known)}); install the package that "
            "does and import it in the gin config, or set RLTask.env to a registered id.")
  # _register_namespace imported the package, and it registered nothing there.
  extra, module, _ = NAMESPACE_PACKAGES[namespace]
  return (f"unknown env id {env_id!r}: the installed {module} registers no env namespace "
          f"{namespace!r}; reinstall the {extra} extra: {install_hint(extra)}.")


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
    modes = _declared_render_modes(env_id)
    if modes is not None and 'rgb_array' not in modes:
      raise _cannot_record(env_id, modes)
    kwargs['render_mode'] = 'rgb_array'
  mode = (dict(vectorization_mode='vector_entry_point') if own else
          dict(vectorization_mode='sync', wrappers=list(wrappers),
               vector_kwargs={'autoreset_mode': AutoresetMode.SAME_STEP}))
  try:
    vector_env = gym.make_vec(env_id, num_envs=n_envs, **mode, **kwargs)
  except gym.error.DependencyNotInstalled as e:
    raise _missing_package(env_id, e) from None
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
    if own:
      with video_errors(env_id):
        # Copy 0's frames only; its first episode starts with the first reset.
        return VectorRecordVideo(vector_env, video_folder, record_first_only=True,
                                 episode_trigger=lambda episode: episode == 0,
                                 name_prefix='eval', disable_logger=True)
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


def extra_for(env_id):
  """The extra of setup.py that installs what `env_id` needs; None if it needs none of ours."""
  entry_point = gym.spec(env_id).entry_point
  module = entry_point if isinstance(entry_point, str) else getattr(entry_point, '__module__', '')
  for prefix, extra in ENTRY_POINT_EXTRAS.items():
    if module == prefix or module.startswith((prefix + '.', prefix + ':')):
      return extra
  return None


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


def dump_env_state(vector_env):
  """Pickles the sub-envs (physics state and their RNGs) for an exact resume.

  Returns None for envs whose state cannot be saved (e.g. Box2D's); the
  caller then resets them on resume, which is correct but not bit-exact.
  """
  buffer = io.BytesIO()
  try:
    _EnvPickler(buffer, pickle.HIGHEST_PROTOCOL).dump(vector_env.envs)
  except Exception:  # pylint: disable=broad-except
    return None
  return buffer.getvalue()


def load_env_state(vector_env, blob):
  vector_env.envs = pickle.loads(blob)


class _EnvPickler(pickle.Pickler):
  """Pickles envs with their state, also those whose own pickling would drop it.

  gymnasium's EzPickle envs (ALE, MuJoCo, Box2D) pickle only their constructor
  arguments: unpickled, they are new envs at the start of a game, and a resume
  from them would join the running episode to another one without a word.
  Those whose simulator can save its state (ALE, MuJoCo) are pickled as their
  constructor arguments plus that state; the others (Box2D) cannot be saved.
  """

  def reducer_override(self, obj):
    if not isinstance(obj, EzPickle):
      return NotImplemented
    saver = _simulator_saver(obj)
    if saver is None:
      raise pickle.PicklingError(f'cannot save the state of {type(obj).__name__}')
    save, restore = saver
    env_state = {name: getattr(obj, name) for name in _ENV_ATTRIBUTES if hasattr(obj, name)}
    # EzPickle's own record of the constructor's arguments.
    args, kwargs = obj._ezpickle_args, obj._ezpickle_kwargs  # pylint: disable=protected-access
    return _rebuild_env, (type(obj), args, kwargs, env_state, restore, save(obj))


# gymnasium.Env's own state: its generator (no-op starts, MuJoCo's reset noise)
# and what gymnasium.make set on it.
_ENV_ATTRIBUTES = ('_np_random', '_np_random_seed', 'spec')


def _simulator_saver(env):
  """(save, restore) of an EzPickle env's simulator state, or None where we cannot save it."""
  if hasattr(getattr(env, 'ale', None), 'cloneState'):
    return _save_ale, _restore_ale
  mujoco = sys.modules.get('mujoco')
  if mujoco is not None and isinstance(getattr(env, 'model', None), mujoco.MjModel):
    return _save_mujoco, _restore_mujoco
  return None


def _rebuild_env(cls, args, kwargs, env_state, restore, simulator_state):
  env = cls(*args, **kwargs)
  for name, value in env_state.items():
    setattr(env, name, value)
  restore(env, simulator_state)
  return env


def _save_ale(env):
  # With the RNG: sticky actions draw from it.
  return env.ale.cloneState(include_rng=True)


def _restore_ale(env, state):
  env.ale.restoreState(state)


def _save_mujoco(env):
  import mujoco  # pylint: disable=import-outside-toplevel
  # Everything mj_step reads, the solver's warm start included: the positions
  # and velocities alone give other numbers a few steps on.
  spec = mujoco.mjtState.mjSTATE_INTEGRATION
  state = np.empty(mujoco.mj_stateSize(env.model, spec))
  mujoco.mj_getState(env.model, env.data, state, spec)
  return state


def _restore_mujoco(env, state):
  import mujoco  # pylint: disable=import-outside-toplevel
  mujoco.mj_setState(env.model, env.data, state, mujoco.mjtState.mjSTATE_INTEGRATION)
