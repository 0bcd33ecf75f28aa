"""How much CPU work on the machine's other core slows a JAX-native epoch.

The floor of benchmarks/jax_native_throughput.py (PPO on gymnax CartPole,
written out bare) runs on one XLA thread pinned to core 0, timed in turns:
alone, and with a busy loop pinned to core 1. On a machine whose cores share
a physical core's units (hyperthreads, as a cloud VM's vCPUs often are) the
second is slower, and so every bit of a run's host work (booking epochs,
writing metrics and checkpoints) slows its training, though it runs on
another core (docs/performance.md).

Usage: python benchmarks/core_sharing.py [--rounds 12]
Linux only (it pins threads with sched_setaffinity).
"""
import argparse
import os
import statistics
import subprocess
import sys
import time

# XLA's CPU pool sizes itself from this variable when JAX makes its client.
os.environ['PJRT_NPROC'] = '1'
REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO_ROOT)

import jax  # noqa: E402

from benchmarks.ppo_floor import HPARAMS  # noqa: E402
from benchmarks.ppo_floor import ScanLoop  # noqa: E402
from benchmarks.ppo_floor import make_ppo  # noqa: E402

UPDATES_PER_CALL = 25
# The other side: a process on core 1 that only spins.
BUSY_LOOP = 'import os\nos.sched_setaffinity(0, {1})\nwhile True:\n  pass\n'


def main():
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument('--rounds', type=int, default=12, help='turns of each side')
  parser.add_argument('--calls', type=int, default=8, help='calls of 25 updates a turn')
  args = parser.parse_args()
  if len(os.sched_getaffinity(0)) < 2:
    sys.exit('core_sharing: this process may run on one core only; it needs two.')
  os.sched_setaffinity(0, {0})  # before JAX makes its threads, which inherit it
  init, update, _ = make_ppo(HPARAMS)
  loop = ScanLoop(update, jax.jit(init)(0), UPDATES_PER_CALL)

  def ms_per_update():
    start = time.perf_counter()
    for _ in range(args.calls):
      loop()
    return (time.perf_counter() - start) / (args.calls * UPDATES_PER_CALL) * 1000

  ms_per_update()  # compiles
  alone, shared = [], []
  for _ in range(args.rounds):
    alone.append(ms_per_update())
    busy = subprocess.Popen([sys.executable, '-c', BUSY_LOOP])
    try:
      time.sleep(0.2)  # the loop is running
      shared.append(ms_per_update())
    finally:
      busy.kill()
      busy.wait()
  ratios = [a / s for a, s in zip(alone, shared)]
  print(f'floor update alone: {statistics.median(alone):.2f} ms; with core 1 busy: '
        f'{statistics.median(shared):.2f} ms (medians of {args.rounds} turns)')
  print(f'busy/alone speed ratio: {statistics.median(ratios):.2f} '
        f'(turns {min(ratios):.2f}-{max(ratios):.2f})')


if __name__ == '__main__':
  main()
