"""JAX's persistent compilation cache, on by default in a per-user folder.

A process compiles its jitted functions (model init, acting, the training
steps) before and during its first epoch; on 2 CPU cores that is seconds.
With the cache, a later process that compiles the same programs (the same run
resumed, another seed, the same config again, rl.evaluate) loads them from
disk instead.

Where, in order of precedence:
  1. rl.run's and rl.evaluate's --compilation_cache_dir flag, when given:
     a folder, or '', 'off' or 'none' for no cache;
  2. the RL_COMPILATION_CACHE_DIR environment variable, when set: a folder,
     or '', 'off' or 'none' for no cache (it reaches every run of a sweep);
  3. $XDG_CACHE_HOME/rl/jax_compilation_cache, with XDG_CACHE_HOME defaulting
     to ~/.cache.

Every compiled program is cached, however small or quick to compile: a
CartPole run's programs each compile in well under JAX's default threshold
of 1 s, yet together they take most of its start-up. The folder is only a
cache: deleting it at any time is safe. A folder that cannot be created or
written to is reported with one warning line and the run goes on without it.
"""
import os
import sys
import tempfile
import warnings

import jax

ENV_VAR = 'RL_COMPILATION_CACHE_DIR'
# Values of the flag or the environment variable that turn the cache off
# (any case, surrounding spaces ignored). 'none' among them: a user who types
# it means no cache, not a folder of that name in the working directory.
OFF = ('', 'off', 'none')


def is_off(value):
  """Whether a flag or environment value turns the cache off."""
  return value.strip().lower() in OFF


def default_dir(environ=None):
  """$XDG_CACHE_HOME/rl/jax_compilation_cache (XDG_CACHE_HOME: ~/.cache when unset or empty)."""
  environ = os.environ if environ is None else environ
  base = environ.get('XDG_CACHE_HOME') or os.path.join(os.path.expanduser('~'), '.cache')
  return os.path.join(base, 'rl', 'jax_compilation_cache')


def resolve(flag_value=None, environ=None):
  """The cache folder (absolute), or None for no cache.

  Args:
    flag_value: the --compilation_cache_dir flag's value; None when not given.
    environ: the environment (default: os.environ).
  """
  environ = os.environ if environ is None else environ
  if flag_value is not None:
    value = flag_value
  elif ENV_VAR in environ:
    value = environ[ENV_VAR]
  else:
    return default_dir(environ)
  if is_off(value):
    return None
  return os.path.abspath(os.path.expanduser(value.strip()))


def _writable(path):
  """None if `path` is (or can be made) a folder we can write to, else why not."""
  try:
    os.makedirs(path, exist_ok=True)
    # A real write: os.access says yes to root even on read-only filesystems.
    fd, probe = tempfile.mkstemp(prefix='.rl-write-probe-', dir=path)
    os.close(fd)
    os.remove(probe)
  except OSError as e:
    return e.strerror or str(e)
  return None


def configure(flag_value=None, program='rl.run'):
  """Turns JAX's persistent compilation cache on (in its folder) or off; call before compiling.

  Returns the folder, or None when the cache is off.
  """
  path = resolve(flag_value)
  if path is not None:
    problem = _writable(path)
    if problem is not None:
      print(f"{program}: warning: the compilation cache folder '{path}' is not writable "
            f'({problem}); running without it. Set --compilation_cache_dir or {ENV_VAR} '
            "to another folder, or to '' to turn the cache off.", file=sys.stderr)
      path = None
  if path is None:
    # Off even when JAX's own JAX_COMPILATION_CACHE_DIR is set.
    jax.config.update('jax_enable_compilation_cache', False)
    return None
  jax.config.update('jax_enable_compilation_cache', True)
  jax.config.update('jax_compilation_cache_dir', path)
  # JAX caches only programs that took at least 1 s to compile; each of a
  # small run's takes less, and together they are most of its start-up.
  jax.config.update('jax_persistent_cache_min_compile_time_secs', 0.0)
  # -1: no minimum entry size (0 would let JAX pick one for the filesystem).
  jax.config.update('jax_persistent_cache_min_entry_size_bytes', -1)
  # A cache entry that cannot be written (a full disk) costs a compilation at
  # the next start, nothing else; JAX warns in two lines per program, which
  # would bury the one line a run that cannot write its own files ends with.
  warnings.filterwarnings('ignore', message='Error writing persistent compilation cache entry')
  return path
