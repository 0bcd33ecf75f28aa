"""The sweep's grid: the YAML file of bindings and values, grid points, their folder names.

A sweep file maps gin binding names to lists of values; `expand` makes every
combination, times every seed, into runs (launch.sweep runs them).
"""
import itertools
import re

import yaml

from launch.errors import SweepError
from rl.envs.task import MAX_SEED
# The folder names of grid points and the gin text of values, shared with rl.run --grid.
from rl.grid import MAX_NAME  # noqa: F401  (tests read it from here)
from rl.grid import gin_value
from rl.grid import is_traceable
from rl.grid import point_name

SEED_BINDING = 'RLTask.seed'

# -- the grid -----------------------------------------------------------------------


def _check_value(name, value):
  if isinstance(value, (list, tuple)):
    for item in value:
      _check_value(name, item)
  elif not isinstance(value, (str, int, float, bool, type(None))):
    raise SweepError(f"sweep value {value!r} of '{name}' is not a number, string, bool, "
                     'null or list of those.')


def validate_sweep(sweep):
  """Checks a {binding name: [values]} dict; returns it with keys sorted."""
  if not isinstance(sweep, dict) or not sweep:
    raise SweepError('the sweep must map gin binding names to lists of values, e.g. '
                     "'RLTask.gamma: [0.99, 0.95]'.")
  for name, values in sweep.items():
    if not isinstance(name, str) or not re.fullmatch(r'[\w./]+\.\w+', name):
      raise SweepError(f"sweep key {name!r} is not a gin binding name like 'RLTask.gamma'.")
    if name == SEED_BINDING:
      raise SweepError(f'sweep seeds with --seeds, not {SEED_BINDING}.')
    if not isinstance(values, list) or not values:
      raise SweepError(f"sweep values of '{name}' must be a non-empty list, e.g. "
                       f"'{name}: [a, b]'.")
    for value in values:
      _check_value(name, value)
  # Sorted so the folder names do not depend on the order of the YAML file.
  return {name: sweep[name] for name in sorted(sweep)}


class _Loader(yaml.SafeLoader):
  """PyYAML follows YAML 1.1, which reads 1e-3 as a string; learning rates need floats."""


_Loader.add_implicit_resolver(
    'tag:yaml.org,2002:float',
    re.compile(r'^[-+]?(?:[0-9][0-9_]*)(?:\.[0-9_]*)?[eE][-+]?[0-9]+$'),
    list('-+0123456789'))


def load_sweep(path):
  try:
    with open(path) as f:
      sweep = yaml.load(f, Loader=_Loader)  # safe: _Loader is a SafeLoader
  except OSError as e:
    raise SweepError(f"cannot read sweep file '{path}' ({e.strerror}).") from None
  except yaml.YAMLError as e:
    raise SweepError(f"sweep file '{path}' is not valid YAML: "
                     f"{' '.join(str(e).split())[:200]}") from None
  try:
    return validate_sweep(sweep)
  except SweepError as e:
    raise SweepError(f"sweep file '{path}': {e}") from None


def expand(sweep, seeds):
  """Every grid point x seed, in a fixed order, as dicts: folder, bindings, seed.

  Raises SweepError if two runs would share a folder (values that differ only
  in characters the folder name replaces).
  """
  sweep = validate_sweep(sweep)
  runs = []
  for values in itertools.product(*sweep.values()):
    bindings = dict(zip(sweep, values))
    for seed in seeds:
      runs.append({'folder': f'{point_name(bindings)}/seed_{seed}', 'bindings': bindings,
                   'seed': seed})
  seen = {}
  for run in runs:
    other = seen.setdefault(run['folder'], run)
    if other is not run:
      raise SweepError(f"sweep values {other['bindings']} and {run['bindings']} map to the "
                       f"same folder '{run['folder']}'; make them differ in letters or digits.")
  return runs


def point_of(run):
  """The grid point folder of a run, e.g. 'RLTask.gamma=0.95' of 'RLTask.gamma=0.95/seed_0'."""
  return run['folder'].rpartition('/')[0]


def program_of(run):
  """The name of what a JAX-native run's compiled program depends on: its bindings but the
  float hyperparameters that a grid varies inside one program (rl.grid.TRACEABLE)."""
  return point_name({k: v for k, v in run['bindings'].items() if not is_traceable(k)})


def gin_bindings(bindings):
  return [f'{name} = {gin_value(value)}' for name, value in bindings.items()]


def parse_seeds(texts):
  try:
    seeds = [int(t) for t in texts]
  except ValueError:
    raise SweepError(f'--seeds must be integers separated by commas, not {texts}.') from None
  if not seeds or len(set(seeds)) != len(seeds):
    raise SweepError(f'--seeds must list at least one seed, each once, not {texts}.')
  if not all(0 <= seed <= MAX_SEED for seed in seeds):
    raise SweepError(f'--seeds must be from 0 to {MAX_SEED} (2**31 - 1), not {texts}.')
  return seeds
