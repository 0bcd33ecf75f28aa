"""Running a sweep's runs on a backend: one rl.run process per run or per JAX-native point.

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
from launch.index import write_index
from rl import compilation_cache

# The log of a JAX-native grid point's one rl.run, inside the point's folder.
SEEDS_LOG = 'seeds.log'


def log_of(run, together=frozenset()):
  """A run's log file relative to the sweep folder: seed_<n>.log, or its JAX-native point's."""
  point = point_of(run)
  return f'{point}/{SEEDS_LOG}' if point in together else run['folder'] + '.log'


def processes_of(runs, together=frozenset()):
  """`runs` grouped as rl.run processes run them, in their order: lists of runs.

  The runs of a grid point in `together` (JAX-native ones) share one process,
  placed where the point's first run is; every other run is a process alone.
  """
  groups = []
  by_point = {}
  for run in runs:
    point = point_of(run)
    if point not in together:
      groups.append([run])
    elif point in by_point:
      by_point[point].append(run)
    else:
      by_point[point] = [run]
      groups.append(by_point[point])
  return groups


def job(run, config_files, extra_config, output_dir, allow_config_change=False,
        compilation_cache_dir=None, together=False):
  """The keyword arguments of processes.run_rl_logged for one process, all paths absolute.

  `run` is one run, or with `together` a list of runs of one grid point that
  one rl.run --seeds trains into the point's folder, logging to its seeds.log.
  Absolute here, on the driver: a Ray task runs in another working directory.
  Sweep bindings come last, so they win over a --config that binds the same name.
  """
  if compilation_cache_dir and not compilation_cache.is_off(compilation_cache_dir):
    compilation_cache_dir = os.path.abspath(os.path.expanduser(compilation_cache_dir))
  runs = run if together else [run]
  points = {point_of(r) for r in runs}
  if together and len(points) != 1:
    raise ValueError(f'runs of one process must share a grid point, not {sorted(points)}')
  first = runs[0]
  kwargs = {'config_files': [os.path.abspath(p) for p in config_files],
            'bindings': list(extra_config) + gin_bindings(first['bindings']),
            'allow_config_change': allow_config_change,
            'compilation_cache_dir': compilation_cache_dir}
  if together:
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


def _label(group, together):
  """How progress lines name a process: its run's folder, or '<point> (seeds 0,1)'."""
  if not together:
    return group[0]['folder']
  return f"{point_of(group[0])} (seeds {','.join(str(r['seed']) for r in group)})"


def run_sweep(runs, config_files, extra_config, output_dir, backend, parallel=None,
              header=None, skipped=frozenset(), allow_config_change=False,
              compilation_cache_dir=None, together=frozenset()):
  """Runs the runs on `backend`, `parallel` processes at most at once, keeping index.json current.

  The runs whose folders are in `skipped` (see finished_before) count as
  finished and are not run; `backend` may be None when that is all of them.
  The other runs of a grid point in `together` (its folder name; the
  JAX-native points of check_points) run as one rl.run --seeds process,
  every other run as a process of its own.
  Returns the runs with 'status' ('finished' | 'failed'), 'log' and, for failed
  ones, 'error' filled in (a process's outcome is that of each run it ran).
  On KeyboardInterrupt the backend's processes are stopped, the runs cut short
  marked 'interrupted' (the rest stay 'pending') and Interrupted is raised;
  the caller closes the backend.
  """
  os.makedirs(output_dir, exist_ok=True)
  header = header or {}
  runs = [dict(run, status='finished' if run['folder'] in skipped else 'pending',
               log=log_of(run, together))
          for run in runs]
  write_index(output_dir, header, runs)
  if skipped:
    print(f'[sweep] {len(skipped)} of {len(runs)} runs finished earlier; skipping them',
          flush=True)
  queue = collections.deque(
      (group, point_of(group[0]) in together)
      for group in processes_of([run for run in runs if run['status'] == 'pending'], together))
  parallel = parallel or max(1, len(queue))
  in_flight = {}  # future: (its runs, whether they run together)
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
        group, jointly = queue.popleft()
        in_flight[backend.submit(job(group if jointly else group[0], config_files,
                                     extra_config, output_dir, allow_config_change,
                                     compilation_cache_dir, together=jointly))] = (group,
                                                                                    jointly)
        progress(_label(group, jointly), 'started')
      done, _ = concurrent.futures.wait(in_flight,
                                        return_when=concurrent.futures.FIRST_COMPLETED)
      for future in done:
        group, jointly = in_flight.pop(future)
        error = _outcome(future)
        for run in group:
          if error is None:
            run['status'] = 'finished'
          else:
            run['status'], run['error'] = 'failed', error
        write_index(output_dir, header, runs)
        progress(_label(group, jointly), 'finished' if error is None else f'FAILED: {error}')
  except KeyboardInterrupt:
    backend.stop()
    for group, _ in in_flight.values():
      for run in group:
        run['status'] = 'interrupted'
    write_index(output_dir, header, runs)
    raise Interrupted(f'{n_runs(in_flight.values())} runs cut short, {n_runs(queue)} not '
                      'started') from None
  return runs
