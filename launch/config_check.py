"""The sweep's config parsed as each grid point's rl.run will: typos early, JAX-native points."""
import hashlib

import gin

from launch.errors import SweepError
from launch.grid import gin_bindings
from launch.grid import point_of
from rl import config
from rl import experiment  # pylint: disable=unused-import  (gin names of every configurable)
from rl import overridden
from rl.envs import gymnax_envs as jax_envs
from rl.errors import UserError

ENV_BINDING = 'RLTask.env'


def bound_env():
  """The env id the parsed gin config binds to RLTask.env (macros followed); None if none."""
  try:
    value = gin.query_parameter(ENV_BINDING)
    # `RLTask.env = %ENV`: a reference to the macro, whose value is bound apart.
    while (isinstance(value, gin.config.ConfigurableReference)
           and value.configurable.wrapped is gin.config.macro):
      value = gin.query_parameter(f'{value.scoped_selector}.value')
  except ValueError:  # not bound (rl.run then says so), or ambiguous
    return None
  return value if isinstance(value, str) else None


def check_config(config_files, extra_config, runs):
  """Parses the config as every grid point's rl.run will; returns the base config's digest.

  A typo (an unknown parameter, a bad value, a missing include) then fails the
  sweep once, up front, instead of every run. The digest (sha256 of the parsed
  config files and --config bindings, includes and all) tells finished_before
  whether an earlier sweep ran the same config.
  """
  return check_points(config_files, extra_config, runs)[0]


def check_points(config_files, extra_config, runs):
  """check_config's digest, and the grid point folders whose env is JAX-native.

  Those points' seeds run as one rl.run --seeds (see launch.sweep's module doc). A grid
  over a parameter that the run passes itself (Adam.learning_rate, gae.gamma) is refused:
  its runs would all train alike (rl.overridden).
  """
  points = {point_of(run): run['bindings'] for run in runs}
  jax_points = set()
  try:
    for name, bindings in points.items():
      gin.clear_config()
      try:
        config.parse_config(config_files, list(extra_config) + gin_bindings(bindings))
        overridden.check_declared(bindings)
      except UserError as e:
        raise SweepError(f'grid point {name}: {e}') from None
      if jax_envs.is_jax_env(bound_env()):
        jax_points.add(name)
    gin.clear_config()
    try:
      config.parse_config(config_files, extra_config)
    except UserError as e:
      raise SweepError(str(e)) from None
    return hashlib.sha256(gin.config_str().encode()).hexdigest(), jax_points
  finally:
    gin.clear_config()
