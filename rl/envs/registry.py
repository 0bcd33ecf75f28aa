"""Env ids checked against gymnasium's registry: suggestions, namespaces, extras.

Every env the runner makes has its id checked here, so a bad env id fails
once, early, with a suggestion, before anything is written to the output
folder.
"""
import collections
import difflib
import importlib
import importlib.util

import gymnasium as gym
from gymnasium.envs.registration import parse_env_id

from rl.envs import packages
from rl.envs import partial_observability  # pylint: disable=unused-import  (registers rl's own ids)
from rl.envs.packages import install_hint
from rl.errors import ConfigError

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


def extra_for(env_id):
  """The extra of setup.py that installs what `env_id` needs; None if it needs none of ours."""
  entry_point = gym.spec(env_id).entry_point
  module = entry_point if isinstance(entry_point, str) else getattr(entry_point, '__module__', '')
  for prefix, extra in ENTRY_POINT_EXTRAS.items():
    if module == prefix or module.startswith((prefix + '.', prefix + ':')):
      return extra
  return None
