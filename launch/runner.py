"""Running a sweep's runs on a backend: one rl.run process per run, or per JAX-native program.

launch.sweep (its module doc says what a sweep runs and where) checks its
input, then hands the runs to run_sweep, which keeps index.json current.
"""
import collections
import concurrent.futures
import os
import time

from launch import processes
from launch.grid import gin_bindings
from launch.grid import point_of
from launch.grid import program_of
from launch.index import write_index
from rl import compilation_cache

# The log of a JAX-native grid point's one rl.run, inside the point's folder.
SEEDS_LOG = 'seeds.log'
# The log of one rl.run --grid training several JAX-native grid points, in the sweep folder.
GRID_LOG = 'grid{}.log'


def grid_programs(runs, together):
  """The programs (launch.grid.program_of) of the JAX-native points in `together` that hold
  several grid points: each is one rl.run --grid, all its points vmapped together."""
  points = collections.defaultdict(set)
  for run in runs:
    if point_of(run) in together:
      points[program_of(run)].add(point_of(run))
  return {program for program, names in points.items() if len(names) > 1}


def grid_log(program):
  return GRID_LOG.format(f'_{program}' if program else '')


def log_of(run, together=frozenset(), grids=frozenset()):
  """A run's log file relative to the sweep folder: seed_<n>.log, or its JAX-native point's
  or grid program's (grid_programs)."""
  point = point_of(run)
  if point not in together:
    return run['folder'] + '.log'
  return grid_log(program_of(run)) if program_of(run) in grids else f'{point}/{SEEDS_LOG}'


def process_key(run, together=frozenset(), grids=frozenset()):
  """What the runs of one process share: nothing (a run alone), a JAX-native grid point, or
  a grid program."""
  point = point_of(run)
  if point not in together:
    return None
  return ('grid', program_of(run)) if program_of(run) in grids else ('point', point)


def processes_of(runs, together=frozenset(), grids=frozenset()):
  """`runs` grouped as rl.run processes run them, in their order: lists of runs.

  The runs of a grid point in `together` (JAX-native ones) share one process,
  and so do those of the points of a grid program in `grids`, placed where
  the first run is; every other run is a process alone.
  """
  groups = []
  by_key = {}
  for run in runs:
    key = process_key(run, together, grids)
    if key is None:
      groups.append([run])
    elif key in by_key:
      by_key[key].append(run)
    else:
      by_key[key] = [run]
      groups.append(by_key[key])
  return groups


def job(run, config_files, extra_config, output_dir, allow_config_change=False,
        compilation_cache_dir=None, together=False, grid=False):
  """The keyword arguments of processes.run_rl_logged for one process, all paths absolute.

  `run` is one run, or with `together` a list of runs of one grid point that
  one rl.run --seeds trains into the point's folder, logging to its seeds.log,
  or with `grid` too the runs of one grid program, which one rl.run --grid
  trains into their folders under the sweep's, every sweep binding a --grid
  flag (a traceable one with the values of the runs, any other with its one
  value), logging to the program's grid log.
  Absolute here, on the driver: a Ray task runs in another working directory.
  Sweep bindings come last, so they win over a --config that binds the same name.
  """
  if compilation_cache_dir and not compilation_cache.is_off(compilation_cache_dir):
    compilation_cache_dir = os.path.abspath(os.path.expanduser(compilation_cache_dir))
  runs = run if together else [run]
  first = runs[0]
  kwargs = {'config_files': [os.path.abspath(p) for p in config_files],
            'bindings': list(extra_config) + gin_bindings(first['bindings']),
            'allow_config_change': allow_config_change,
            'compilation_cache_dir': compilation_cache_dir}
  seeds = sorted({r['seed'] for r in runs})
  if grid:
    if len({program_of(r) for r in runs}) != 1:
      raise ValueError('runs of one process must share a grid program')
    # Each binding's values in the runs' order (the sweep file's), once each.
    values = {name: list({repr(r['bindings'][name]): r['bindings'][name]
                          for r in runs}.values()) for name in first['bindings']}
    kwargs.update(output_dir=os.path.abspath(output_dir), seed=None, seeds=seeds, grid=values,
                  bindings=list(extra_config),
                  log_path=os.path.abspath(os.path.join(output_dir,
                                                        grid_log(program_of(first)))))
  elif together:
    points = {point_of(r) for r in runs}
    if len(points) != 1:
      raise ValueError(f'runs of one process must share a grid point, not {sorted(points)}')
    point = points.pop()
    kwargs.update(output_dir=os.path.abspath(os.path.join(output_dir, point)), seed=None,
                  seeds=[r['seed'] for r in runs],
                  log_path=os.path.abspath(os.path.join(output_dir, point, SEEDS_LOG)))
  else:
    kwargs.update(output_dir=os.path.abspath(os.path.join(output_dir, first['folder'])),
                  seed=first['seed'],
                  log_path=os.path.abspath(os.path.join(output_dir, first['folder'] + '.log')))
  return kwargs


class Interrupted(Exception):
  """The sweep was stopped (SIGINT or SIGTERM); index.json says which runs were cut short."""


def _outcome(future):
  """A finished future's error line (None: the run finished)."""
  try:
    return future.result()
  except Exception as e:  # pylint: disable=broad-except  # e.g. a Ray worker or node died
    return f'{type(e).__name__}: {processes.last_line(str(e))}'[:500]


def _label(group, key):
  """How progress lines name a process (`key`: its process_key): its run's folder,
  '<point> (seeds 0,1)' or 'grid <program> (N points, seeds 0,1)'."""
  if key is None:
    return group[0]['folder']
  seeds = ','.join(str(s) for s in sorted({r['seed'] for r in group}))
  if key[0] == 'grid':
    n_points = len({point_of(r) for r in group})
    return f'grid {key[1] or "of the sweep"} ({n_points} points, seeds {seeds})'
  return f"{point_of(group[0])} (seeds {','.join(str(r['seed']) for r in group)})"


def run_sweep(runs, config_files, extra_config, output_dir, backend, parallel=None,
              header=None, skipped=frozenset(), allow_config_change=False,
              compilation_cache_dir=None, together=frozenset()):
  """Runs the runs on `backend`, `parallel` processes at most at once, keeping index.json current.

  The runs whose folders are in `skipped` (see finished_before) count as
  finished and are not run; `backend` may be None when that is all of them.
  The other runs of a grid point in `together` (its folder name; the
  JAX-native points of check_points) run as one rl.run --seeds process, those
  of JAX-native points that differ only in float hyperparameters as one
  rl.run --grid process (grid_programs), every other run as a process of its own.
  Returns the runs with 'status' ('finished' | 'failed'), 'log' and, for failed
  ones, 'error' filled in (a process's outcome is that of each run it ran).
  On KeyboardInterrupt the backend's processes are stopped, the runs cut short
  marked 'interrupted' (the rest stay 'pending') and Interrupted is raised;
  the caller closes the backend.
  """
  os.makedirs(output_dir, exist_ok=True)
  header = header or {}
  grids = grid_programs(runs, together)
  runs = [dict(run, status='finished' if run['folder'] in skipped else 'pending',
               log=log_of(run, together, grids))
          for run in runs]
  write_index(output_dir, header, runs)
  if skipped:
    print(f'[sweep] {len(skipped)} of {len(runs)} runs finished earlier; skipping them',
          flush=True)
  queue = collections.deque(
      (group, process_key(group[0], together, grids))
      for group in processes_of([run for run in runs if run['status'] == 'pending'], together,
                                grids))
  parallel = parallel or max(1, len(queue))
  in_flight = {}  # future: (its runs, their process_key)
  started = time.perf_counter()

  def n_runs(groups):
    return sum(len(group) for group, _ in groups)

  def progress(label, what):
    n_done = sum(r['status'] == 'finished' for r in runs)
    n_failed = sum(r['status'] == 'failed' for r in runs)
    print(f'[sweep] {n_done} done / {n_runs(in_flight.values())} {backend.in_flight} / '
          f'{n_failed} failed of {len(runs)} ({time.perf_counter() - started:.0f} s): '
          f'{label} {what}', flush=True)

  try:
    while queue or in_flight:
      while queue and len(in_flight) < parallel:
        group, key = queue.popleft()
        in_flight[backend.submit(job(group if key else group[0], config_files, extra_config,
                                     output_dir, allow_config_change, compilation_cache_dir,
                                     together=key is not None,
                                     grid=key is not None and key[0] == 'grid'))] = (group, key)
        progress(_label(group, key), 'started')
      done, _ = concurrent.futures.wait(in_flight,
                                        return_when=concurrent.futures.FIRST_COMPLETED)
      for future in done:
        group, key = in_flight.pop(future)
        error = _outcome(future)
        for run in group:
          if error is None:
            run['status'] = 'finished'
          else:
            run['status'], run['error'] = 'failed', error
        write_index(output_dir, header, runs)
        progress(_label(group, key), 'finished' if error is None else f'FAILED: {error}')
  except KeyboardInterrupt:
    backend.stop()
    for group, _ in in_flight.values():
      for run in group:
        run['status'] = 'interrupted'
    write_index(output_dir, header, runs)
    raise Interrupted(f'{n_runs(in_flight.values())} runs cut short, {n_runs(queue)} not '
                      'started') from None
  return runs
