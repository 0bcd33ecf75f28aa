"""Compile and run time of the trainers' epoch under each set of XLA CPU options.

For each trainer, built from its shipped CartPole config after a few epochs of
collection (as benchmarks/train_throughput.py builds them), the epoch's one
compiled call (`update`: every network's fused epoch) is lowered once and
compiled under each set of options:
  elemental  rl.compiler.FAST_COMPILE_OPTIONS (compiler.fast_compile, the
             classic-control configs): XLA's elemental emitters;
  fusion     rl.compiler.FAST_RUN_OPTIONS (XLA's defaults, the long runs'
             configs);
  elemental+calling, fusion+calling: each with Eigen's matrix products on
             the calling thread instead of XLA's thread pool.
'compile' is the one compilation of each (wall and CPU seconds; JAX keeps
the executable, so a second one would be a cache hit), after a small program
has been compiled under every set; 'epoch' the median of --repeats calls on the same inputs, the sets taking
turns so that the load of a shared machine weighs on all of them alike, each
call's results read back as rl.run reads them. 'cpu' counts every thread of
the process.

Usage: python benchmarks/compiler_options.py [--trainers ppo,dqn,a2c,ppo_joint]
         [--repeats 40]
"""
import argparse
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import jax  # noqa: E402

from benchmarks.train_throughput import TRAINERS as TRAIN_THROUGHPUT_TRAINERS  # noqa: E402
from benchmarks.train_throughput import build  # noqa: E402
from rl import compiler  # noqa: E402
from rl import cpu_client  # noqa: E402

# name -> (config file, epochs collected first)
TRAINERS = dict(TRAIN_THROUGHPUT_TRAINERS, a2c=('a2c_cartpole.gin', 4))

CALLING_THREAD = {'xla_cpu_multi_thread_eigen': False}
OPTION_SETS = {
    'elemental': compiler.FAST_COMPILE_OPTIONS,
    'fusion': compiler.FAST_RUN_OPTIONS,
    'elemental+calling': dict(compiler.FAST_COMPILE_OPTIONS, **CALLING_THREAD),
    'fusion+calling': dict(compiler.FAST_RUN_OPTIONS, **CALLING_THREAD),
}


def _parse_args():
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument('--trainers', default='ppo,dqn,a2c,ppo_joint',
                      help=f"comma-separated subset of {', '.join(TRAINERS)}")
  parser.add_argument('--repeats', type=int, default=40, help='timed epochs of each set')
  args = parser.parse_args()
  args.trainers = [n for n in args.trainers.split(',') if n]
  unknown = sorted(set(args.trainers) - set(TRAINERS))
  if unknown or not args.trainers:
    parser.error(f"--trainers: unknown {', '.join(unknown) or '(none given)'}; "
                 f"pick from {', '.join(TRAINERS)}")
  if args.repeats < 1:
    parser.error('--repeats must be >= 1')
  return args


def timed(fn):
  """(fn's result, wall seconds, CPU seconds of the process)."""
  wall, cpu = time.perf_counter(), time.process_time()
  result = fn()
  return result, time.perf_counter() - wall, time.process_time() - cpu


def measure(trainer, repeats):
  """{set: (compile wall, compile cpu, epoch wall, epoch cpu)} in seconds, epochs' medians."""
  inputs = (trainer.learner.train_state, trainer.epoch_data(trainer.learner.epoch))
  lowered = jax.jit(trainer.update).lower(*inputs)
  compiled, compile_times = {}, {}
  for name, options in OPTION_SETS.items():
    compiled[name], *compile_times[name] = timed(
        lambda options=options: lowered.compile(compiler_options=dict(options)))

  def epoch(fn):
    _, results, extra = fn(*inputs)
    return jax.device_get((results, extra))
  for fn in compiled.values():
    epoch(fn)
  epoch_times = {name: ([], []) for name in compiled}
  for _ in range(repeats):
    for name, fn in compiled.items():
      _, wall, cpu = timed(lambda fn=fn: epoch(fn))
      epoch_times[name][0].append(wall)
      epoch_times[name][1].append(cpu)
  return {name: (*compile_times[name], statistics.median(epoch_times[name][0]),
                 statistics.median(epoch_times[name][1])) for name in compiled}


def main():
  args = _parse_args()
  # rl.run computes inline on host envs (rl.cpu_client).
  cpu_client.choose_dispatch(inline=True)
  print(f'machine: {os.cpu_count()} cores; epoch: median of {args.repeats}')
  # XLA's first compilation under a set of options pays its set-up: not the epoch's.
  for options in OPTION_SETS.values():
    jax.jit(lambda x: x * 2 + 1, compiler_options=dict(options)).lower(1.0).compile()
  for name in args.trainers:
    config, n_epochs = TRAINERS[name]
    trainer = build(config, n_epochs)
    times = measure(trainer, args.repeats)
    reference = times['elemental']
    for options, (c_wall, c_cpu, e_wall, e_cpu) in times.items():
      print(f'{name} ({config}) {options:17s}: compile {c_wall:.2f} s (cpu {c_cpu:.2f} s), '
            f'epoch {1e3 * e_wall:.2f} ms (cpu {1e3 * e_cpu:.2f} ms); against '
            f'elemental: compile x{c_wall / reference[0]:.2f}, '
            f'epoch x{e_wall / reference[2]:.2f}')
    trainer.close()


if __name__ == '__main__':
  main()
