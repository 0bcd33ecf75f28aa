"""Start-up time of rl.run against the bare import of jax, flax and optax.

Each repeat runs, one after the other (interleaved, so a busy machine's
drifts fall on all alike):
  import: `python -c "import jax, flax, optax"`, timed from just before the
          process starts to the end of the import statement (a wall-clock
          mark the process prints; its exit, which shuts jax down, takes
          tenths of a second more and is shown apart);
  cold:   `python -m rl.run --config_file=<config> --config 'train_rl.n_epochs=1'`
          in a fresh output folder with a fresh, empty compilation cache folder
          (--compilation_cache_dir);
  warm:   the same run in another fresh output folder with the cache folder the
          cold run of this repeat filled;
  resumed: the warm run's folder run again to 2 epochs, which resumes from its
          checkpoint: what compiling a resume pays with that cache (a resumed
          state must give the programs a fresh run compiled, or they compile again).
For the runs it reports the seconds from just before the process starts to
  main:        rl.run's main() (imports done, flags parsed),
  epoch start: the first epoch's start (config parsed, trainer built, the
               compilation of its init done),
  epoch end:   the first epoch's end (its record and console line written),
read from the wall-clock marks rl.run appends to the file named by
$RL_TIMING_FILE (rl/experiment.py: mark_time), and the first epoch's time_compile
from its metrics.jsonl. Medians over --repeats, with the range.

The goal it checks: a warm run reaches its first epoch at most 1.5 s after
the import alone would be done. The last two lines are
  startup - import: N.NN s      (median warm epoch start - median import)
  startup/import ratio: X.XX    (median warm epoch start / median import)
scripts compare runs by parsing the last one.

Usage: python benchmarks/startup.py [--repeats 5] [--config_file configs/ppo_cartpole.gin]
"""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# rl.run's $RL_TIMING_FILE and metrics.jsonl; not imported so this script
# itself stays light (it would otherwise import jax and compete with the runs).
TIMING_ENV_VAR = 'RL_TIMING_FILE'
METRICS_FILE = 'metrics.jsonl'
EVENTS = ('main', 'first_epoch_start', 'first_epoch_end')


def _parse_args():
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument('--repeats', type=int, default=5,
                      help='measurements of each; the median is reported')
  parser.add_argument('--config_file', default=os.path.join(REPO_ROOT, 'configs',
                                                            'ppo_cartpole.gin'),
                      help='the run to start')
  args = parser.parse_args()
  if args.repeats < 1:
    parser.error('--repeats must be >= 1')
  return args


def _env():
  """This environment with the checkout importable first (no install needed)."""
  env = dict(os.environ)
  env['PYTHONPATH'] = os.pathsep.join(p for p in (REPO_ROOT, env.get('PYTHONPATH')) if p)
  env.pop(TIMING_ENV_VAR, None)
  return env


def time_import():
  """Seconds from process start to the import's end, and to the process's exit."""
  start = time.time()
  result = subprocess.run(
      [sys.executable, '-c', 'import jax, flax, optax; import time; print(time.time())'],
      check=True, cwd=REPO_ROOT, env=_env(), stdout=subprocess.PIPE, text=True)
  return float(result.stdout) - start, time.time() - start


def time_run(config_file, output_dir, cache_dir, timing_file, n_epochs=1):
  """{event: seconds from process start} and the time_compile of the process's first (its
  only) epoch, of one run to `n_epochs`."""
  env = dict(_env(), **{TIMING_ENV_VAR: timing_file})
  command = [sys.executable, '-m', 'rl.run', f'--config_file={config_file}',
             f'--output_dir={output_dir}', f'--compilation_cache_dir={cache_dir}',
             f'--config=train_rl.n_epochs = {n_epochs}']
  start = time.time()
  result = subprocess.run(command, cwd=REPO_ROOT, env=env, stdout=subprocess.DEVNULL,
                          stderr=subprocess.PIPE, text=True)
  if result.returncode != 0:
    sys.exit(f'rl.run failed (exit {result.returncode}): {result.stderr.strip()}')
  with open(timing_file) as f:
    marks = dict(line.split() for line in f if line.strip())
  seconds = {event: float(marks[event]) - start for event in EVENTS}
  with open(os.path.join(output_dir, METRICS_FILE)) as f:
    seconds['time_compile'] = json.loads(f.readlines()[-1])['time_compile']
  return seconds


def _summary(values):
  return (f'{statistics.median(values):6.2f} s (range {min(values):.2f}..{max(values):.2f})')


def main():
  args = _parse_args()
  config_file = os.path.abspath(args.config_file)
  work = tempfile.mkdtemp(prefix='rl-startup-benchmark-')
  imports, exits, runs = [], [], {'cold': [], 'warm': [], 'resumed': []}
  try:
    for i in range(args.repeats):
      imported, exited = time_import()
      imports.append(imported)
      exits.append(exited)
      cache_dir = os.path.join(work, f'cache_{i}')  # fresh for each cold run
      for kind in ('cold', 'warm'):
        runs[kind].append(time_run(config_file, os.path.join(work, f'{kind}_{i}'), cache_dir,
                                   os.path.join(work, f'{kind}_{i}.timing')))
      runs['resumed'].append(time_run(config_file, os.path.join(work, f'warm_{i}'), cache_dir,
                                      os.path.join(work, f'resumed_{i}.timing'), n_epochs=2))
      print(f'repeat {i + 1}/{args.repeats}: import {imports[-1]:.2f} s, epoch start cold '
            f"{runs['cold'][-1]['first_epoch_start']:.2f} s, warm "
            f"{runs['warm'][-1]['first_epoch_start']:.2f} s, resumed epoch's time_compile "
            f"{runs['resumed'][-1]['time_compile']:.2f} s", flush=True)
  finally:
    shutil.rmtree(work, ignore_errors=True)

  print(f'{os.path.relpath(config_file, REPO_ROOT)}, train_rl.n_epochs=1, median of '
        f'{args.repeats} interleaved repeats, {os.cpu_count()} CPUs; seconds from process start')
  rows = [('import jax, flax, optax', imports), ('import jax, flax, optax, to exit', exits)]
  labels = {'main': 'main()', 'first_epoch_start': 'first epoch start',
            'first_epoch_end': 'first epoch end', 'time_compile': 'first epoch time_compile'}
  for kind in ('cold', 'warm', 'resumed'):
    where = 'resumed on the warm cache' if kind == 'resumed' else f'{kind} cache'
    rows += [(f'rl.run, {where}, {label}', [r[event] for r in runs[kind]])
             for event, label in labels.items()]
  width = max(len(label) for label, _ in rows) + 1
  for label, values in rows:
    print(f'{label + ":":{width}s} {_summary(values)}')
  startup = statistics.median(r['first_epoch_start'] for r in runs['warm'])
  cold_startup = statistics.median(r['first_epoch_start'] for r in runs['cold'])
  imported = statistics.median(imports)
  print(f'cold startup - import: {cold_startup - imported:.2f} s')
  print(f'startup - import: {startup - imported:.2f} s')
  # Last line by contract: scripts compare runs by parsing it.
  print(f'startup/import ratio: {startup / imported:.2f}')


if __name__ == '__main__':
  main()
