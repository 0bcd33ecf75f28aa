"""Several runs of one config in one process: the seeds of --seeds and the members of --grid.

Every member is an ordinary run folder (rl.experiment.prepared_run): the
seeds of `--seeds=0-3` in <output_dir>/seed_<n>, and with `--grid` every cell
times every seed in <output_dir>/<cell>/seed_<n>, the cell's bindings applied
after the config's own (rl.grid). Each folder resumes, and rl.evaluate and
rl.report read it. On JAX-native envs the members train together, vmapped in
one compiled call per epoch (rl.seeds), a grid's values entering that
program as traced inputs (rl.traced_values); on gymnasium envs they run one
after another.
"""
import contextlib
import os
from typing import NamedTuple

from rl import config
from rl import console
from rl import grid as grid_lib
from rl import run_folder
from rl import run_settings
from rl.errors import ConfigError
from rl.experiment import prepared_run
from rl.experiment import train
from rl.learner import time_left


class Member(NamedTuple):
  """One run of the job."""
  folder: str
  seed: int
  cell: dict  # its grid cell's {binding name: value} ({} without a grid)


def members_of(output_dir, seeds, grid=None):
  """The job's members: every grid cell (one without a grid) times every seed."""
  cells = grid_lib.cells(grid) if grid else [{}]
  grid_lib.check_size(len(cells), len(seeds))
  return [Member(run_folder.seed_folder(
      os.path.join(output_dir, grid_lib.point_name(cell)) if cell else output_dir, seed),
                 seed, cell) for cell in cells for seed in seeds]


def configured_seed(config_files, bindings):
  """The seed the config gives a run (RLTask.seed, 0 when unbound)."""
  run_settings.configure(config_files, bindings, None)
  seed = config.bound_value('RLTask.seed')
  return 0 if seed is None else seed


def execute(config_files, bindings, output_dir, seeds, allow_config_change=False, grid=None):
  """Runs `seeds` of one config (times the cells of `grid`, {binding: [values]}), each in its
  own folder (module doc). seeds None: the config's seed. Returns the trainers."""
  from rl import seeds as seeds_lib  # pylint: disable=import-outside-toplevel
  if output_dir is None:
    if not config_files:
      raise ConfigError('give --config_file=<file.gin> or the --output_dir of the seeds.')
    output_dir = run_folder.default_output_dir(config_files)
  if seeds is None:
    if not config_files:
      raise ConfigError('give --seeds with --output_dir alone: the seeds to resume.')
    seeds = [configured_seed(config_files, bindings)]
  run_folder.check_seeds_parent(output_dir)
  members = members_of(output_dir, seeds, grid)
  throttle = None

  def check(learner, unused):
    """Before the first member's folder is written: what a grid can be, here."""
    if not grid:
      return
    unused = [name for name in grid if name in unused]
    if unused:
      raise ConfigError(f"--grid {', '.join(unused)}: {config.unused_bindings_warning(unused)}")
    if learner.task.jax_native:
      grid_lib.check_memory(learner, len(members))
    elif len(members) > len(seeds):
      print(f'rl.run: the grid\'s {len(members) // len(seeds)} cells run one after another '
            'as separate runs: on gymnasium envs a grid is not one program (on JAX-native '
            'envs it is).', flush=True)

  def prepared(member, check=None):
    files = config_files or [run_folder.saved_config(member.folder)]
    label = f'{grid_lib.point_name(member.cell)} ' if member.cell else ''
    return prepared_run(files, bindings + grid_lib.cell_bindings(member.cell), member.folder,
                        member.seed, allow_config_change,
                        log_prefix=f'{label}seed {member.seed}: ', check=check)

  def share_throttle(prepared_runs):
    nonlocal throttle
    if throttle is None:
      settings = prepared_runs[0].console
      throttle = console.Throttle(settings['every_seconds'], settings['verbose'])
    for run in prepared_runs:
      run.throttle = throttle

  # A member's folder is made when it starts: on JAX-native envs all of them
  # start together, in one batch; on gymnasium envs each when the one before
  # it is done.
  with prepared(members[0], check) as first:
    batched = first.learner.task.jax_native
    runs = [first]
    if batched:
      with contextlib.ExitStack() as stack:
        runs += [stack.enter_context(prepared(member)) for member in members[1:]]
        share_throttle(runs)
        values = {name: [m.cell[name] for m in members] for name in grid or {}
                  if grid_lib.is_traceable(name)}
        seeds_lib.train_together(runs, values)
    else:
      # The members not yet started are counted as whole runs in the time
      # left (their folders, and so how far each got, are read when they start).
      options = first.learner.options
      whole = time_left.epochs_left(0, first.run.n_epochs, options.eval_every,
                                    options.n_eval_episodes)
      share_throttle(runs)
      first.later = tuple(n * (len(members) - 1) for n in whole)
      train(first)
      first.log_done(next_steps=False)
  if batched:
    for run in runs:
      run.log_done(next_steps=False)
  else:
    for i, member in enumerate(members[1:], start=2):
      with prepared(member) as run:
        share_throttle([run])
        run.later = tuple(n * (len(members) - i) for n in whole)
        train(run)
        run.log_done(next_steps=False)
      runs.append(run)
  if runs[0].run.n_epochs:
    print(console.next_steps(runs[0].output_dir, output_dir), flush=True)
  return [run.trainer for run in runs]
