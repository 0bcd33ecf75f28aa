"""How rl.report groups runs: by their config but the seed, each group named by what sets it apart.

A run's config.gin lists every binding it used. Runs whose bindings are
equal but for RLTask.seed form a group; a group is named by the bindings
whose values differ from the other groups', shortened to their parameter
names, and `bindings_table` lists those bindings in full.
"""
import os

from rl.config import config_bindings
from rl.run_folder import CONFIG_FILE

SEED_BINDING = 'RLTask.seed'
UNSET = '(unset)'
# A group's name lists differing bindings up to about this many characters
# (the table under its heading lists them all), each value up to VALUE_CHARS.
NAME_CHARS = 60
VALUE_CHARS = 24
# The bindings that tell groups apart best, named first when they differ.
LEADING_BINDINGS = ('train_rl.trainer_class', 'RLTask.env')


def run_bindings(run_dir):
  """The run's config bindings without its seed ({} when config.gin is missing)."""
  path = os.path.join(run_dir, CONFIG_FILE)
  if not os.path.isfile(path):
    return {}
  with open(path) as f:
    bindings = config_bindings(f.read())
  bindings.pop(SEED_BINDING, None)
  return bindings


def group_runs(run_dirs, default_name):
  """[(name, {binding: value} telling it apart, [run_dir, ...])] of runs equal but for the seed.

  Groups keep the order of their first run and are named by `group_names`; a
  lone group is called `default_name` and has no bindings to tell it apart.
  """
  groups = {}
  for run_dir in run_dirs:
    bindings = run_bindings(run_dir)
    groups.setdefault(tuple(sorted(bindings.items())), (bindings, []))[1].append(run_dir)
  if len(groups) == 1:
    return [(default_name, {}, next(iter(groups.values()))[1])]
  tables = differing_bindings([bindings for bindings, _ in groups.values()])
  names = group_names(tables)
  return [(name, table, runs) for name, table, (_, runs) in zip(names, tables, groups.values())]


def differing_bindings(all_bindings):
  """Per group, {key: value} of the bindings whose values differ between groups.

  LEADING_BINDINGS come first, then the others by name. config.gin lists
  every parameter of the configurables a run used, defaults included, so a
  binding that some groups lack belongs to a configurable only the others
  use (another trainer's parameters): the binding choosing it
  (train_rl.trainer_class) already differs, and listing each of those as
  '(unset)' would list hundreds. Such bindings count only when the others
  would not tell every group apart.
  """
  order = {k: i for i, k in enumerate(LEADING_BINDINGS)}
  keys = sorted(set().union(*all_bindings), key=lambda k: (order.get(k, len(order)), k))
  differing = [k for k in keys if len({b[k] for b in all_bindings if k in b}) > 1]
  tables = [{k: b[k] for k in differing if k in b} for b in all_bindings]
  if all(tables) and len({tuple(t.items()) for t in tables}) == len(tables):
    return tables
  differing = [k for k in keys if len({b.get(k, UNSET) for b in all_bindings}) > 1]
  return [{k: b.get(k, UNSET) for k in differing} for b in all_bindings]


def short_names(keys):
  """{key: its parameter name}, or the whole key where two keys share the parameter name."""
  params = [k.rpartition('.')[2] for k in keys]
  return {k: p if params.count(p) == 1 else k for k, p in zip(keys, params)}


def _short_value(value):
  return value if len(value) <= VALUE_CHARS else value[:VALUE_CHARS - 1] + '…'


def group_names(tables):
  """Names telling groups apart from their differing bindings ({key: value} each).

  'param=value, ...' by parameter name (short_names), values cut at
  VALUE_CHARS, as many as fit in about NAME_CHARS; '+N more' counts the rest,
  which the table under the heading shows.
  """
  names = []
  for table in tables:
    short = short_names(list(table))
    parts = [f'{short[k]}={_short_value(v)}' for k, v in table.items()]
    name = ''
    for i, part in enumerate(parts):
      if name and len(name) + len(part) > NAME_CHARS:
        name += f' (+{len(parts) - i} more)'
        break
      name += (', ' if name else '') + part
    names.append(name)
  return names


def bindings_table(table):
  """The markdown table of a group's differing bindings, in full."""
  if not table:
    return []
  rows = [f"| {k} | {v.replace('|', chr(92) + '|')} |" for k, v in table.items()]
  return ['| binding | value |', '|---|---|'] + rows + ['']
