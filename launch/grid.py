"""The sweep's grid: the YAML file of bindings and values, grid points, their folder names.

A sweep file maps gin binding names to lists of values; `expand` makes every
combination, times every seed, into runs (launch.sweep runs them).
"""
import hashlib
import itertools
import re

import yaml

from launch.errors import SweepError
from rl.envs.task import MAX_SEED

SEED_BINDING = 'RLTask.seed'
# Characters kept in folder names; the rest become '_' so names are safe in
# shells and on every filesystem.
_UNSAFE = re.compile(r'[^A-Za-z0-9._+-]')
# Filesystems cap a name at 255 bytes; longer grid-point names are cut and
# keep a hash of the full name so they stay distinct.
MAX_NAME = 200

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


def gin_value(value):
  """`value` as gin source text: strings quoted, numbers as is, lists as tuples."""
  if isinstance(value, str) and value[:1] in ('@', '%'):
    return value  # a reference or macro would stop being one inside quotes
  if isinstance(value, (list, tuple)):
    return '(' + ''.join(gin_value(v) + ', ' for v in value).rstrip(' ') + ')'
  return repr(value)


def _name_text(value):
  """The readable text of a value in a folder name: strings without their quotes."""
  if isinstance(value, (list, tuple)):
    return 'x'.join(_name_text(v) for v in value)
  return value if isinstance(value, str) else repr(value)


def point_name(bindings):
  """The folder name of one grid point, e.g. 'RLTask.gamma=0.95,RLTask.n_envs=4'."""
  name = ','.join(f'{_UNSAFE.sub("_", k)}={_UNSAFE.sub("_", _name_text(v))}'
                  for k, v in sorted(bindings.items()))
  if len(name) > MAX_NAME:
    digest = hashlib.sha256(name.encode()).hexdigest()[:12]
    name = f'{name[:MAX_NAME - 13]}~{digest}'
  return name


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
