"""How rl.report groups runs: by their config but the seed, each group named by what sets it apart.

A run's config.gin lists every binding it used. Runs whose bindings are
equal but for RLTask.seed form a group. Where folders tell the groups apart
(a sweep's <point>/seed_<n>, runs/ppo/seed_<n> beside runs/a2c/seed_<n>), a
group is named by its folder; otherwise by the bindings whose values differ
from the other groups', shortened to their parameter names. `bindings_table`
lists those bindings in full.
"""
import os
import re

from rl.config import config_bindings
from rl.run_folder import CONFIG_FILE

SEED_BINDING = 'RLTask.seed'
ENV_BINDING = 'RLTask.env'
UNSET = '(unset)'
# The folder of one seed (--seeds, launch.sweep): the folder above it names the group.
SEED_FOLDER = re.compile(r'seed_\d+')
# A group's name lists differing bindings up to about this many characters
# (the table under its heading lists them all), each value up to VALUE_CHARS.
NAME_CHARS = 40
VALUE_CHARS = 24
# The bindings that tell groups apart best, named first and by their value alone when they differ.
LEADING_BINDINGS = ('train_rl.trainer_class', ENV_BINDING)


def run_bindings(run_dir):
  """The run's config bindings without its seed ({} when config.gin is missing)."""
  path = os.path.join(run_dir, CONFIG_FILE)
  if not os.path.isfile(path):
    return {}
  with open(path) as f:
    bindings = config_bindings(f.read())
  bindings.pop(SEED_BINDING, None)
  return bindings


def env_name(bindings):
  """The env id a run's bindings name (RLTask.env, quotes removed), or '(unknown env)'."""
  return bindings.get(ENV_BINDING, '(unknown env)').strip('\'"')


def group_folder(run_dir, runs_dir):
  """The folder that names a run's group: its path under `runs_dir`, above a seed_<n> folder.

  '.' for `runs_dir` itself (a lone run, or a --seeds run's parent).
  """
  head, tail = os.path.split(os.path.relpath(run_dir, runs_dir))
  return (head or '.') if SEED_FOLDER.fullmatch(tail) else os.path.join(head, tail)


def group_runs(run_dirs, runs_dir):
  """[(name, {binding: value} telling it apart, [run_dir, ...])] of runs equal but for the seed.

  Groups keep the order of their first run. When each group's runs lie in a
  folder of their own (`group_folder`), that folder names it ('.': the name
  of `runs_dir`); otherwise `group_names` names groups by their bindings.
  """
  groups = {}
  for run_dir in run_dirs:
    bindings = run_bindings(run_dir)
    groups.setdefault(tuple(sorted(bindings.items())), (bindings, []))[1].append(run_dir)
  default_name = os.path.basename(os.path.abspath(runs_dir))
  if len(groups) == 1:
    return [(default_name, {}, next(iter(groups.values()))[1])]
  tables = differing_bindings([bindings for bindings, _ in groups.values()])
  folders = [{group_folder(run_dir, runs_dir) for run_dir in runs} for _, runs in groups.values()]
  if all(len(f) == 1 for f in folders) and len(set().union(*folders)) == len(folders):
    names = [default_name if folder == '.' else folder for (folder,) in folders]
  else:
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


def _name_part(key, short_key, value):
  """'A2C' for the trainer, 'CartPole-v1' for the env (a name needs no more), else 'param=value'."""
  if key in LEADING_BINDINGS:
    return _short_value(value.strip('@\'"'))
  return f'{short_key}={_short_value(value)}'


def group_names(tables):
  """Names telling groups apart from their differing bindings ({key: value} each).

  'A2C, CartPole-v1, param=value, ...': the trainer and env by their value,
  the others by parameter name (short_names), values cut at VALUE_CHARS, as
  many as fit in about NAME_CHARS; '+N more' counts the rest, which the
  table under the heading shows. Names that the cut makes equal end in
  their group's number, [1], [2], ...
  """
  names = []
  for table in tables:
    short = short_names(list(table))
    parts = [_name_part(k, short[k], v) for k, v in table.items()]
    name = ''
    for i, part in enumerate(parts):
      if name and len(name) + len(part) > NAME_CHARS:
        name += f' (+{len(parts) - i} more)'
        break
      name += (', ' if name else '') + part
    names.append(name)
  return [f'{name} [{i}]' if names.count(name) > 1 else name
          for i, name in enumerate(names, 1)]


def bindings_table(table):
  """The markdown table of a group's differing bindings, in full."""
  if not table:
    return []
  rows = [f"| {k} | {v.replace('|', chr(92) + '|')} |" for k, v in table.items()]
  return ['| binding | value |', '|---|---|'] + rows + ['']
