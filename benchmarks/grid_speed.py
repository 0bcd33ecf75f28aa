"""A grid in one program against the same number of seeds, and against one seed alone.

Three `python -m rl.run` processes of one JAX-native config, side by side:
one seed; `--seeds=0-<M-1>`; and a grid of M members (`--grid` over two float
hyperparameters x `--seeds`), M = cells x seeds. For each it prints the
process's wall time, its peak resident memory, and the env steps a second of
all its members after the first epoch (the compiling one): the members x the
epoch's env steps over the median epoch's training time. The grid's values are
inputs of its program where the seeds' are constants, so grid/seeds near 1
means a grid costs what the same number of seeds costs.

With --jobs grid only the grid runs (beside another framework's, say).

Usage: python benchmarks/grid_speed.py [--config_file configs/ppo_minatar_breakout_jax.gin]
           [--n_epochs 12] [--seeds 0-3] [--grid 'PPO.epsilon=[0.1, 0.15, 0.2, 0.3]'] ...
           [--config 'PPO.policy_train_steps_per_epoch = 16' ...] [--jobs all|grid]
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
sys.path.insert(0, REPO_ROOT)  # runnable from a checkout without installing the package
# pylint: disable=wrong-import-position
from rl import grid as grid_lib  # noqa: E402
from rl.metrics import read_metrics  # noqa: E402
from rl.seeds import parse_seeds  # noqa: E402

GRID = ['PPO.epsilon=[0.1, 0.15, 0.2, 0.3]',
        'policy/multifactor.constant=[0.0005, 0.001, 0.002, 0.004]']


def _parse_args():
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument('--config_file', default=os.path.join(REPO_ROOT, 'configs',
                                                            'ppo_minatar_breakout_jax.gin'))
  parser.add_argument('--n_epochs', type=int, default=12)
  parser.add_argument('--seeds', default='0-3', help="the grid's seeds")
  parser.add_argument('--grid', action='append', help=f'--grid flags (default: {GRID})')
  parser.add_argument('--config', action='append', default=[], help='bindings of every job')
  parser.add_argument('--jobs', choices=('all', 'grid'), default='all')
  return parser.parse_args()


def _run(args, flags, scratch):
  """(wall seconds, peak RSS in MiB, run folders) of one rl.run process."""
  out = tempfile.mkdtemp(dir=scratch)
  command = [sys.executable, '-m', 'rl.run', f'--config_file={args.config_file}',
             f'--output_dir={out}/job', '--config', f'train_rl.n_epochs = {args.n_epochs}',
             '--config', f'train_rl.checkpoint_every = {args.n_epochs}',
             '--config', 'PPO.n_eval_episodes = 0',
             *[f'--config={binding}' for binding in args.config], *flags]
  start = time.perf_counter()
  process = subprocess.Popen(command, cwd=REPO_ROOT, stdout=subprocess.DEVNULL)
  _, status, usage = os.wait4(process.pid, 0)
  seconds = time.perf_counter() - start
  if status:
    raise SystemExit(f'{" ".join(command)} failed')
  folders = [root for root, _, files in os.walk(out) if 'metrics.jsonl' in files]
  return seconds, usage.ru_maxrss / 1024, folders


def _rate(folders):
  """Env steps a second of all the folders' runs after their first epoch."""
  records = read_metrics(folders[0])
  steps = records[0]['env_steps']
  seconds = statistics.median(r['time_train'] for r in records[1:])
  return len(folders) * steps / seconds


def main():
  args = _parse_args()
  grid = grid_lib.parse_grid(args.grid or GRID)
  n_members = len(grid_lib.cells(grid)) * len(parse_seeds(args.seeds))
  jobs = {
      'one seed': ['--seed=0'],
      f'--seeds=0-{n_members - 1}': [f'--seeds=0-{n_members - 1}'],
      f'grid {len(grid_lib.cells(grid))} cells x seeds {args.seeds}':
          [f'--seeds={args.seeds}', *[f'--grid={t}' for t in (args.grid or GRID)]],
  }
  if args.jobs == 'grid':
    jobs = dict(list(jobs.items())[2:])
  scratch = tempfile.mkdtemp(prefix='grid_speed_')
  rows = {}
  try:
    for name, flags in jobs.items():
      seconds, rss, folders = _run(args, flags, scratch)
      rows[name] = (len(folders), seconds, rss, _rate(folders))
  finally:
    shutil.rmtree(scratch, ignore_errors=True)
  print(f'{os.path.relpath(args.config_file, REPO_ROOT)}, {args.n_epochs} epochs a member:')
  print('| job | members | wall s | peak RSS MiB | env steps/s after compile | '
        'wall per member / one seed |')
  print('|---|---|---|---|---|---|')
  single = rows['one seed'][1] if 'one seed' in rows else None
  for name, (n, seconds, rss, rate) in rows.items():
    per_member = f'{seconds / n / single:.3f}' if single else '-'
    print(f'| {name} | {n} | {seconds:.1f} | {rss:,.0f} | {rate:,.0f} | {per_member} |')
  names = list(rows)
  if len(names) == 3:
    print(f'grid/seeds env steps/s: {rows[names[2]][3] / rows[names[1]][3]:.3f}')


if __name__ == '__main__':
  main()
