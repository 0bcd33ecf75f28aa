"""Whole runs under each compiler choice, by the run's length: where the fusion emitters pay.

For each budget (env steps a seed) it runs `python -m rl.run` on the config with
`train_rl.n_epochs` set to the budget over the config's epoch, three ways, taking turns each
round: `compiler.fast_compile = True` (XLA's elemental emitters), `= False` (its fusion
emitters) and unset (the run's length chooses, rl/compiler.py). Every run starts cold: a
fresh output folder and a fresh, empty compilation cache folder. It reports each run's wall
time, process start to exit (the median over --rounds), and fusion/elemental; a ratio under 1
means the fusion emitters' extra compiling has paid for itself by that budget. The unset
column is the run a user gets without the binding.

Usage: python benchmarks/compile_mode.py [--rounds 2] [--config_file configs/ppo_cartpole_jax.gin]
           [--budgets 512,50000,250000,500000]
"""
import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CHOICES = (('elemental', ['compiler.fast_compile = True']),
           ('fusion', ['compiler.fast_compile = False']),
           ('unset', []))


def _parse_args():
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument('--rounds', type=int, default=2, help='runs of each; the median is shown')
  parser.add_argument('--config_file',
                      default=os.path.join(REPO_ROOT, 'configs', 'ppo_cartpole_jax.gin'))
  parser.add_argument('--steps_per_epoch', type=int, default=256,
                      help="the config's n_interactions_per_epoch")
  parser.add_argument('--budgets', default='512,50000,250000,500000',
                      help='env steps a seed, comma-separated')
  return parser.parse_args()


def _run(config_file, n_epochs, bindings, scratch):
  """Seconds of one cold `rl.run` process."""
  out = tempfile.mkdtemp(dir=scratch)
  cache = tempfile.mkdtemp(dir=scratch)
  command = [sys.executable, '-m', 'rl.run', f'--config_file={config_file}',
             f'--output_dir={out}/run', f'--compilation_cache_dir={cache}',
             '--config', f'train_rl.n_epochs = {n_epochs}',
             '--config', f'train_rl.checkpoint_every = {n_epochs}']
  for binding in bindings:
    command += ['--config', binding]
  start = time.perf_counter()
  subprocess.run(command, cwd=REPO_ROOT, check=True, stdout=subprocess.DEVNULL,
                 stderr=subprocess.DEVNULL)
  seconds = time.perf_counter() - start
  shutil.rmtree(out)
  shutil.rmtree(cache)
  return seconds


def main():
  args = _parse_args()
  budgets = [int(b) for b in args.budgets.split(',')]
  scratch = tempfile.mkdtemp(prefix='compile_mode_')
  times = {(b, name): [] for b in budgets for name, _ in CHOICES}
  try:
    for _ in range(args.rounds):
      for budget in budgets:
        n_epochs = max(1, budget // args.steps_per_epoch)
        for name, bindings in CHOICES:
          times[budget, name].append(_run(args.config_file, n_epochs, bindings, scratch))
  finally:
    shutil.rmtree(scratch, ignore_errors=True)
  print(f'{os.path.relpath(args.config_file, REPO_ROOT)}, cold runs, median of {args.rounds}:')
  print('| env steps | elemental s | fusion s | unset s | fusion/elemental |')
  print('|---|---|---|---|---|')
  for budget in budgets:
    elemental, fusion, unset = (statistics.median(times[budget, name]) for name, _ in CHOICES)
    print(f'| {max(1, budget // args.steps_per_epoch) * args.steps_per_epoch:,} | '
          f'{elemental:.2f} | {fusion:.2f} | {unset:.2f} | {fusion / elemental:.2f} |')


if __name__ == '__main__':
  main()
