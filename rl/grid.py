"""A grid of runs in one program: `rl.run --grid 'PPO.epsilon=[0.1, 0.2]' --seeds=0-3`.

Each --grid flag names one float hyperparameter and its values; the grid's
cells are every combination of them, and its members every cell times every
seed. Each member is an ordinary run in <output_dir>/<cell>/seed_<n> (the
folder names launch.sweep gives the same grid points), with a config.gin
holding its bindings. On JAX-native envs the members train as one compiled
program vmapped over them (rl.seeds.train_together), the grid's values
entering it as traced inputs (rl.traced_values); on gymnasium envs they run
one after another.

Only the parameters in TRACEABLE can vary inside one program: everything else
is a constant of the compiled epoch (network and batch sizes, the env and
n_envs shape it; gamma is also read where the run is built), so a grid over
several of its values is refused in one line that points to launch.sweep,
which runs such values as separate programs.
"""
import ast
import hashlib
import itertools
import os
import re

import numpy as np

from rl.errors import ConfigError

# The float hyperparameters a grid varies inside one program, by gin name:
# where the epoch reads each, it reads it through rl.traced_values.value.
TRACEABLE = {
    'PPO': ('epsilon', 'entropy_coeff'),
    'A2C': ('entropy_coeff',),
    'PPOJoint': ('epsilon', 'entropy_coeff', 'value_loss_coeff'),
    'A2CJoint': ('entropy_coeff', 'value_loss_coeff'),
    'SAC': ('tau',),
    'TD3': ('tau',),
    'multifactor': ('constant',),
    'gae': ('lambda_',),
    'td_lambda': ('lambda_',),
}

# The most members one grid job takes (cells x seeds), as --seeds takes at
# most rl.seeds.MAX_SEEDS.
MAX_MEMBERS = 1024

# Characters kept in folder names; the rest become '_' so names are safe in
# shells and on every filesystem.
_UNSAFE = re.compile(r'[^A-Za-z0-9._+-]')
# Filesystems cap a name at 255 bytes; longer grid-point names are cut and
# keep a hash of the full name so they stay distinct.
MAX_NAME = 200

_BINDING = re.compile(r'(?:(?P<scope>[\w./]+)/)?(?P<name>\w+)\.(?P<param>\w+)')


def is_traceable(name):
  """Whether the binding name ('policy/multifactor.constant') is one of TRACEABLE."""
  match = _BINDING.fullmatch(name)
  return bool(match) and match.group('param') in TRACEABLE.get(match.group('name'), ())


def traceable_list():
  return ', '.join(f'{name}.{p}' for name, params in TRACEABLE.items() for p in params)


def _literal(value):
  """A gin value written as Python: a number, string, bool, None or a list of them."""
  if isinstance(value, (list, tuple)):
    return all(_literal(v) for v in value)
  return value is None or isinstance(value, (int, float, str, bool))


def parse_grid(texts):
  """--grid flags ['PPO.epsilon=[0.1, 0.2]', ...] -> {binding name: [values]}, sorted by name.

  A parameter of TRACEABLE takes numbers; any other takes one value, which
  binds it in every cell and names their folders, as launch.sweep names a
  grid point by all its bindings. Raises ConfigError, naming the flag, for
  bad syntax, a repeated name or value, or several values of a parameter a
  grid cannot vary in one program.
  """
  grid = {}
  for text in texts:
    name, sep, values = str(text).partition('=')
    name = name.strip()
    match = _BINDING.fullmatch(name)
    if not sep or not match:
      raise ConfigError(f"--grid {text!r}: write a binding and its values, e.g. "
                        "--grid 'PPO.epsilon=[0.1, 0.2]'.")
    try:
      values = ast.literal_eval(values.strip())
    except (ValueError, SyntaxError):
      values = None
    traceable = is_traceable(name)
    if (not isinstance(values, (list, tuple)) or not values or not all(
        isinstance(v, (int, float)) and not isinstance(v, bool) if traceable else _literal(v)
        for v in values)):
      raise ConfigError(f"--grid {text!r}: its values must be a list of "
                        f"{'numbers' if traceable else 'values'}, e.g. "
                        f"'{name}=[0.1, 0.2]'.")
    if not traceable and len(values) > 1:
      raise ConfigError(
          f'--grid {name}: a grid varies only float hyperparameters inside one program '
          f'({traceable_list()}); other values change the program: sweep them with '
          'python -m launch.sweep, which runs them as separate runs.')
    if name in grid:
      raise ConfigError(f'--grid {name} is given twice; give all its values in one flag.')
    if len(set(values)) != len(values):
      raise ConfigError(f'--grid {text!r} repeats a value; give each once.')
    grid[name] = [float(v) for v in values] if traceable else list(values)
  return {name: grid[name] for name in sorted(grid)}


def cells(grid):
  """Every combination of the grid's values, in a fixed order: [{binding name: value}]."""
  return [dict(zip(grid, values)) for values in itertools.product(*grid.values())]


def check_size(n_cells, n_seeds):
  n = n_cells * n_seeds
  if n > MAX_MEMBERS:
    raise ConfigError(f'the grid has {n_cells} cells x {n_seeds} seeds = {n:,} members; one '
                      f'job takes at most {MAX_MEMBERS:,}: split it over several --output_dir.')


# -- folder names ------------------------------------------------------------------


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


def cell_bindings(cell):
  """A cell's gin bindings, applied after the config's own."""
  return [f'{name} = {gin_value(value)}' for name, value in cell.items()]


# -- memory ------------------------------------------------------------------------

# The part of the memory a grid's members may take; the rest is left to the
# process's compiled programs and the host's other work.
MEMORY_SHARE = 0.8


def _tree_bytes(tree):
  import jax  # pylint: disable=import-outside-toplevel  # launch reads this module without JAX
  from rl import keys  # pylint: disable=import-outside-toplevel
  return sum(np.dtype(x.dtype).itemsize * int(np.prod(x.shape))
             for x in jax.tree_util.tree_leaves(tree)
             if hasattr(x, 'dtype') and not keys.is_key(x))  # a key is a few bytes


def member_bytes(learner):
  """An estimate of one member's device bytes in a grid's program: its TrainState and env
  carry (the replay too), twice (a call's input and output), and its epoch's data, four
  times (the rollout, its slices, advantages and gathered batches)."""
  state = _tree_bytes((learner.train_state, learner.task.carry))
  space = learner.task.observation_space
  row = (int(np.prod(space.shape)) * np.dtype(space.dtype).itemsize
         + 4 * (learner.actor.dist.n_inputs + 8))
  return 2 * state + 4 * learner.options.n_interactions * row


def available_bytes():
  """The memory the grid may fill: the accelerator's limit, or the host's available memory."""
  import jax  # pylint: disable=import-outside-toplevel
  device = jax.devices()[0]
  stats = device.memory_stats() if device.platform != 'cpu' else None
  if stats and stats.get('bytes_limit'):
    return int(stats['bytes_limit'] - stats.get('bytes_in_use', 0))
  try:
    with open('/proc/meminfo') as f:
      for line in f:
        if line.startswith('MemAvailable:'):
          return int(line.split()[1]) * 1024
  except OSError:
    pass
  return os.sysconf('SC_PAGE_SIZE') * os.sysconf('SC_AVPHYS_PAGES')


def check_memory(learner, n_members):
  """Refuses, in one line, a grid whose members would not fit in memory (before anything is
  written)."""
  per_member = member_bytes(learner)
  need, limit = per_member * n_members, int(available_bytes() * MEMORY_SHARE)
  if need > limit:
    fits = max(limit // max(per_member, 1), 0)
    raise ConfigError(
        f'the grid needs about {need / 2**30:.2f} GiB for its {n_members} members '
        f'({per_member / 2**20:.1f} MiB each), more than the {limit / 2**30:.2f} GiB '
        f'it may use ({MEMORY_SHARE:.0%} of the memory available); at most {fits} members '
        'fit: give fewer grid values or seeds.')
