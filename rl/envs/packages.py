"""The optional packages of envs, by extra: what to say when one cannot be imported.

A package an extra installs is either absent (the fix: install the extra) or
present but failing to import, e.g. on a dependency it uses without declaring
it (gymnax and six) or a broken install. The lines tell the two apart and quote
the real ImportError, so the fix they give is one that works.
"""
import importlib

from rl.errors import ConfigError

# The modules each env extra of setup.py installs, by the names their envs import them.
EXTRA_MODULES = {
    'atari': ('ale_py', 'cv2'),
    'minatar': ('minatar',),
    'mujoco': ('mujoco',),
    'box2d': ('Box2D',),
    'gymnax': ('gymnax',),
}


def install_hint(extra):
  """The pip command that installs one of setup.py's extras."""
  return f"pip install '.[{extra}]'"


def import_module(module, extra, needed_by):
  """`module`, which `extra` installs, imported; a ConfigError with the real failure otherwise.

  needed_by: what needs the module, the subject of the error line ("env 'ALE/Pong-v5'").
  """
  try:
    return importlib.import_module(module)
  except ImportError as e:
    raise ConfigError(import_failure(module, extra, e, needed_by)) from None


def import_failure(module, extra, error, needed_by):
  """The error line for `error`, the ImportError raised by importing `module` of `extra`."""
  package = module.split('.')[0]
  if error.name == package:  # the package itself is absent
    return (f"{needed_by} needs {package}, which is not installed; install the {extra} "
            f"extra: {install_hint(extra)}.")
  reason = str(error).splitlines()[0] if str(error) else type(error).__name__
  return (f"{package} is installed but cannot be imported: {reason}; reinstall the {extra} "
          f"extra, which brings what it needs: {install_hint(extra)}.")


def installed_but_failing(extra, needed_by):
  """The error line for the first module of `extra` that is installed but fails to import.

  None where each is importable or absent (a missing package is told by the caller,
  e.g. from gymnasium's DependencyNotInstalled, which names the pip package).
  """
  for module in EXTRA_MODULES.get(extra, ()):
    try:
      importlib.import_module(module)
    except ImportError as e:
      if e.name != module.split('.')[0]:
        return import_failure(module, extra, e, needed_by)
  return None
