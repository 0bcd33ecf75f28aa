"""The learning benchmark's runs: one `python -m rl.run` process per (config, seed), timed.

benchmarks/learning.py (its module doc says what is measured) runs them here
and reads their metrics.jsonl afterwards.
"""
import concurrent.futures
import contextlib
import json
import os
import shutil
import statistics
import subprocess
import sys
import threading
import time

from benchmarks import learning_records
from launch.processes import run_rl_logged

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CONFIG_DIR = os.path.join(REPO_ROOT, 'configs')


def run_dir(output_dir, config, seed):
  return os.path.join(output_dir, config, f'seed_{seed}')


def run_one(config, seed, output_dir, extra_config, process_wall=False):
  """Runs one (config, seed) to completion. Returns (error line or None, seconds, log path).

  Its stdout and stderr go to <output_dir>/<config>/seed_<n>.log, next to the
  run folder rather than in it, so the file cannot get in rl.run's way.

  With `process_wall` the run is made twice from nothing, each timed as a
  user waits for it (the whole process): first with an empty compilation
  cache of its own (cold), then again into seed_<n>_warm with the cache the
  first run filled (warm). The seconds go to seed_<n>.process_seconds.json,
  but only when the cold run started from an empty folder: a resumed run's
  process time is not the time to its target.
  """
  folder = run_dir(output_dir, config, seed)
  log_path = folder + '.log'
  config_files = [os.path.join(CONFIG_DIR, config + '.gin')]
  if not os.path.exists(folder):
    # The code a run starts with is what its records are stamped with.
    os.makedirs(os.path.dirname(folder), exist_ok=True)
    learning_records.write_stamp(folder, learning_records.git_stamp())
  if not process_wall:
    start = time.perf_counter()
    error = run_rl_logged(config_files, folder, seed, extra_config, log_path)
    return error, time.perf_counter() - start, log_path
  fresh = not os.path.exists(folder)
  cache = folder + '.compilation_cache'
  if fresh:
    shutil.rmtree(cache, ignore_errors=True)
    shutil.rmtree(folder + '_warm', ignore_errors=True)
  else:
    # Seconds measured by an earlier benchmark, on the machine as it was then,
    # would pass for this one's: a resumed run has none (learning.py's main lists them).
    with contextlib.suppress(FileNotFoundError):
      os.remove(folder + PROCESS_SECONDS_SUFFIX)
  seconds = {}
  error = None
  for name, path in (('cold', folder), ('warm', folder + '_warm')):
    start = time.perf_counter()
    error = run_rl_logged(config_files, path, seed, extra_config, log_path,
                          compilation_cache_dir=cache)
    seconds[name] = time.perf_counter() - start
    if error is not None:
      break
  if fresh and error is None:
    with open(folder + PROCESS_SECONDS_SUFFIX, 'w') as f:
      json.dump(seconds, f)
  return error, sum(seconds.values()), log_path


PROCESS_SECONDS_SUFFIX = '.process_seconds.json'


# What every run of a CartPole config starts with; timed before the runs, as
# a reference for the machine's speed at the time (a shared machine's load
# moves every process time by tens of percent within the hour).
REFERENCE_COMMAND = (sys.executable, '-c', 'import jax, flax, optax')


def reference_seconds(repeats=3):
  """Median wall seconds of REFERENCE_COMMAND over `repeats` runs."""
  times = []
  for _ in range(repeats):
    start = time.perf_counter()
    subprocess.run(REFERENCE_COMMAND, check=True, stdout=subprocess.DEVNULL)
    times.append(time.perf_counter() - start)
  return statistics.median(times)


def process_seconds(output_dir, config, seed):
  """{'cold': s, 'warm': s} of a --process_wall run, or None if it has none."""
  try:
    with open(run_dir(output_dir, config, seed) + PROCESS_SECONDS_SUFFIX) as f:
      return json.load(f)
  except (OSError, ValueError):
    return None


def run_all(jobs, output_dir, extra_config, parallel, stop_at=None, process_wall=False):
  """Runs every (config, seed) of `jobs`, `parallel` at a time; failures are reported.

  With `stop_at`, {config: its target}, each run stops at its first eval at or
  above its config's target (train_rl.stop_at_return), which answers "reached
  within the budget?" without training on to the end of the budget.

  Returns {(config, seed): True if the run finished}.
  """
  finished = {}
  print_lock = threading.Lock()
  started = time.perf_counter()
  # Threads only wait on the child processes, so the GIL costs nothing here.
  with concurrent.futures.ThreadPoolExecutor(max_workers=parallel) as pool:
    def bindings(config):
      if stop_at is None:
        return extra_config
      return list(extra_config) + [f'train_rl.stop_at_return = {stop_at[config]}']
    futures = {pool.submit(run_one, config, seed, output_dir, bindings(config),
                           process_wall): (config, seed)
               for config, seed in jobs}
    for future in concurrent.futures.as_completed(futures):
      config, seed = futures[future]
      error, seconds, log_path = future.result()
      finished[(config, seed)] = error is None
      with print_lock:
        status = 'ok' if error is None else f'FAILED: {error} [{log_path}]'
        print(f'[{len(finished)}/{len(futures)}] {config} seed {seed}: {status} in '
              f'{seconds:.0f} s ({time.perf_counter() - started:.0f} s elapsed)', flush=True)
  return finished
