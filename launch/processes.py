"""Running `python -m rl.run` as child processes: the command line and the environment.

Shared by launch/sweep.py and benchmarks/learning.py, which both run many
runs side by side on one machine.
"""
import os
import sys

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# Each run gets one core's worth of threads: with N runs on N cores, XLA's
# Eigen pool and OpenMP would otherwise each start N threads per process and
# the runs would fight over the cores, inflating every wall-clock number.
SINGLE_THREAD_ENV = {
    'XLA_FLAGS': '--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1',
    'OMP_NUM_THREADS': '1',
    'MKL_NUM_THREADS': '1',
    'OPENBLAS_NUM_THREADS': '1',
}


def rl_run_command(config_files, output_dir, seed, bindings=()):
  """`python -m rl.run` with absolute paths (children run from the repo root)."""
  command = [sys.executable, '-m', 'rl.run',
             *[f'--config_file={os.path.abspath(p)}' for p in config_files],
             f'--output_dir={os.path.abspath(output_dir)}', f'--seed={seed}']
  return command + [f'--config={binding}' for binding in bindings]


def child_env():
  """This environment, single-threaded, with the repo root importable (no install needed)."""
  env = dict(os.environ)
  env.update(SINGLE_THREAD_ENV)
  env['PYTHONPATH'] = os.pathsep.join(p for p in (REPO_ROOT, env.get('PYTHONPATH')) if p)
  return env
