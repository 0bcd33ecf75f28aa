"""How far a seed trained in a `--seeds` batch drifts from the same seed trained alone.

A seed draws the same random numbers alone and in a batch (rl/keys.py), but a
batch's matrix products add in another order than one seed's, so from the
first update on the two runs differ by float rounding, and rounding can grow
over a run. This trains every seed of --seeds alone (one `rl.run --seed`
process each) and all of them as one `rl.run --seeds` batch, then prints per
seed: the first epoch whose record differs beyond timings, the first epoch
whose eval return differs, and the final eval return both ways.

Usage: python benchmarks/seed_batch_drift.py [--config ppo_cartpole_jax] [--seeds 0-7]
           [--output_dir runs/seed_batch_drift] [--extra_config BINDING ...]
The runs resume: rerun the same command to finish an interrupted measurement.
"""
import argparse
import os
import statistics
import subprocess
import sys

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO_ROOT)

from rl.metrics import TIMING_KEYS  # pylint: disable=wrong-import-position
from rl.metrics import read_metrics  # pylint: disable=wrong-import-position
from rl.seeds import parse_seeds  # pylint: disable=wrong-import-position


def rl_run(config_file, extra_config, *flags):
  command = [sys.executable, '-m', 'rl.run', f'--config_file={config_file}', *flags]
  command += [f'--config={binding}' for binding in extra_config]
  subprocess.run(command, cwd=REPO_ROOT, check=True, stdout=subprocess.DEVNULL)


def numbers(record):
  return {k: v for k, v in record.items() if k not in TIMING_KEYS and 'per_second' not in k}


def first_difference(alone, batched, key=None):
  """The first epoch whose record (or, with `key`, whose value of key) differs; None if none."""
  for a, b in zip(alone, batched):
    if (numbers(a) != numbers(b)) if key is None else (a.get(key) != b.get(key)):
      return a['epoch']
  return None


def final_eval(records):
  return [r for r in records if 'eval_return' in r][-1]['eval_return']


def main(argv=None):
  parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
  parser.add_argument('--config', default='ppo_cartpole_jax', help='a configs/<name>.gin')
  parser.add_argument('--seeds', default='0-7', help="rl.run's --seeds syntax")
  parser.add_argument('--output_dir', default='runs/seed_batch_drift')
  parser.add_argument('--extra_config', action='append', default=[],
                      help='a gin binding passed to every run; repeatable')
  args = parser.parse_args(argv)
  seeds = parse_seeds(args.seeds)
  config_file = os.path.join(REPO_ROOT, 'configs', args.config + '.gin')
  out = os.path.abspath(args.output_dir)
  for seed in seeds:
    rl_run(config_file, args.extra_config, f'--seed={seed}',
           f'--output_dir={os.path.join(out, "alone", f"seed_{seed}")}')
  rl_run(config_file, args.extra_config, f'--seeds={args.seeds}',
         f'--output_dir={os.path.join(out, "batch")}')

  print(f'{args.config}, seeds {args.seeds}: alone (one process each) against one --seeds batch')
  print('seed | first epoch differing | first eval differing | final eval alone | batched')
  finals = []
  for seed in seeds:
    alone = read_metrics(os.path.join(out, 'alone', f'seed_{seed}'))
    batched = read_metrics(os.path.join(out, 'batch', f'seed_{seed}'))
    finals.append((final_eval(alone), final_eval(batched)))
    print(f'{seed} | {first_difference(alone, batched) or "none"} | '
          f'{first_difference(alone, batched, "eval_return") or "none"} | '
          f'{finals[-1][0]:.1f} | {finals[-1][1]:.1f}')
  alone_finals, batch_finals = zip(*finals)
  print(f'mean final eval: alone {statistics.mean(alone_finals):.1f}, '
        f'batched {statistics.mean(batch_finals):.1f}; largest |difference| '
        f'{max(abs(a - b) for a, b in finals):.1f}')


if __name__ == '__main__':
  main()
