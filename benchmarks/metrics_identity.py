"""Runs every shipped config for a few epochs and keeps its metrics, to compare two revisions.

A restructure must leave every config's numbers as they were. This script runs
each config of configs/ for its epoch count below (classic control 12, the
real workloads 2 or 3), on one XLA thread (PJRT_NPROC=1, so that the numbers
do not depend on the thread count), and writes each run's metrics.jsonl,
timing keys removed, to OUT/<config>.jsonl. `--compare A B` then prints, per
config, whether the two folders' records are identical and the first field
that differs.

  python benchmarks/metrics_identity.py --out /tmp/before          # on the base revision
  python benchmarks/metrics_identity.py --out /tmp/after           # on the change
  python benchmarks/metrics_identity.py --compare /tmp/before /tmp/after
"""
import argparse
import concurrent.futures
import json
import os
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from rl.metrics import TIMING_KEYS  # pylint: disable=wrong-import-position

# Epochs per config: 12 for classic control; 2 or 3 for the real workloads, whose epochs
# take seconds to minutes on a CPU.
EPOCHS = {
    'halfcheetah': 2, 'pendulum': 12, 'minatar': 3, 'boxing': 2, 'pong': 2,
    'lunarlander': 3, 'transformer': 3, 'mujoco': 2, 'walker2d': 2, 'hopper': 2,
}
DEFAULT_EPOCHS = 12


def epochs_of(config):
  for word, n in EPOCHS.items():
    if word in config:
      return n
  return DEFAULT_EPOCHS


def shipped_configs():
  folder = os.path.join(ROOT, 'configs')
  return sorted(name for name in os.listdir(folder) if name.endswith('.gin'))


def run(config, out, extra_files=()):
  """Runs `config` for its epochs into a fresh folder; writes OUT/<config>.jsonl."""
  name = os.path.basename(config)
  with tempfile.TemporaryDirectory() as folder:
    command = [sys.executable, '-m', 'rl.run', f'--config_file={config}',
               *(f'--config_file={f}' for f in extra_files),
               f'--output_dir={folder}', '--config', f'train_rl.n_epochs = {epochs_of(name)}']
    env = dict(os.environ, PJRT_NPROC='1')
    done = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True,
                          check=False)
    if done.returncode:
      return name, f'failed ({done.returncode}): {done.stderr.strip().splitlines()[-1:]}'
    with open(os.path.join(folder, 'metrics.jsonl'), encoding='utf-8') as f:
      records = [json.loads(line) for line in f]
  records = [{k: v for k, v in r.items() if k not in TIMING_KEYS} for r in records]
  with open(os.path.join(out, name.replace('.gin', '.jsonl')), 'w', encoding='utf-8') as f:
    for record in records:
      f.write(json.dumps(record, sort_keys=True) + '\n')
  return name, f'{len(records)} epochs'


def compare(a, b):
  """Prints, per config in either folder, whether its records are identical."""
  names = sorted(set(os.listdir(a)) | set(os.listdir(b)))
  same = 0
  for name in names:
    paths = [os.path.join(folder, name) for folder in (a, b)]
    if not all(os.path.exists(p) for p in paths):
      print(f'{name:45s} missing in {" and ".join(p for p in paths if not os.path.exists(p))}')
      continue
    records = []
    for path in paths:
      with open(path, encoding='utf-8') as f:
        records.append([json.loads(line) for line in f])
    if records[0] == records[1]:
      same += 1
      print(f'{name:45s} identical ({len(records[0])} epochs)')
      continue
    diff = next((r0['epoch'], k, r0.get(k), r1.get(k)) for r0, r1 in zip(*records)
                for k in sorted(set(r0) | set(r1)) if r0.get(k) != r1.get(k))
    print(f'{name:45s} DIFFERS: epoch {diff[0]}, {diff[1]}: {diff[2]} vs {diff[3]}')
  print(f'{same} of {len(names)} identical')
  return same == len(names)


def main():
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument('--out', help='folder for the runs\' records')
  parser.add_argument('--configs', nargs='*', help='config files (default: all of configs/)')
  parser.add_argument('--extra_config_file', action='append', default=[],
                      help='a gin file applied after each config (e.g. an example algorithm)')
  parser.add_argument('--jobs', type=int, default=2, help='configs run at once')
  parser.add_argument('--compare', nargs=2, metavar=('A', 'B'))
  args = parser.parse_args()
  if args.compare:
    sys.exit(0 if compare(*args.compare) else 1)
  os.makedirs(args.out, exist_ok=True)
  configs = args.configs or [os.path.join('configs', c) for c in shipped_configs()]
  with concurrent.futures.ThreadPoolExecutor(args.jobs) as pool:
    for name, outcome in pool.map(lambda c: run(c, args.out, args.extra_config_file), configs):
      print(f'{name:45s} {outcome}', flush=True)


if __name__ == '__main__':
  main()
