"""Running `python -m rl.run` as child processes: the command line, environment and log.

Shared by a sweep's backends (launch/backends.py: on this machine and inside Ray tasks) and
benchmarks/learning.py, which all run many runs side by side.
"""
import ctypes
import ctypes.util
import datetime
import os
import shlex
import signal
import subprocess
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


def rl_run_command(config_files, output_dir, seed, bindings=(), allow_config_change=False,
                   compilation_cache_dir=None, seeds=None, grid=None):
  """`python -m rl.run` with absolute paths (children run from the repo root).

  compilation_cache_dir: rl.run's --compilation_cache_dir ('' for none); None
  leaves it out, so the child's RL_COMPILATION_CACHE_DIR or default applies.
  seeds: several seeds for one process (rl.run's --seeds; `seed` must then be
  None): each runs in <output_dir>/seed_<n>. grid: {binding name: [values]}, rl.run's
  --grid flags: every cell times every seed runs in <output_dir>/<cell>/seed_<n>.
  """
  if seeds is not None:
    if seed is not None:
      raise ValueError('give seed or seeds, not both')
    seed_flag = '--seeds=' + ','.join(str(int(s)) for s in seeds)
  else:
    seed_flag = f'--seed={seed}'
  command = [sys.executable, '-m', 'rl.run',
             *[f'--config_file={os.path.abspath(p)}' for p in config_files],
             f'--output_dir={os.path.abspath(output_dir)}', seed_flag]
  if allow_config_change:
    command.append('--allow_config_change')
  if compilation_cache_dir is not None:
    command.append(f'--compilation_cache_dir={compilation_cache_dir}')
  command += [f'--grid={name}={list(values)!r}' for name, values in (grid or {}).items()]
  return command + [f'--config={binding}' for binding in bindings]


def child_env():
  """This environment, single-threaded, with the repo root importable (no install needed)."""
  env = dict(os.environ)
  env.update(SINGLE_THREAD_ENV)
  env['PYTHONPATH'] = os.pathsep.join(p for p in (REPO_ROOT, env.get('PYTHONPATH')) if p)
  return env


# Linux can deliver a signal to a child when the thread that started it dies
# (prctl PR_SET_PDEATHSIG). A sweep killed outright, or a Ray worker killed by
# ray.cancel, then takes its rl.run with it instead of leaving an orphan that
# keeps training and holds the run folder's lock. Resolved here, before any
# fork, so the child only makes the raw call.
_PR_SET_PDEATHSIG = 1
_LIBC = ctypes.CDLL(ctypes.util.find_library('c'), use_errno=True) if sys.platform == 'linux' \
    else None


def _die_with_parent():
  _LIBC.prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)


def last_line(text):
  lines = [line.strip() for line in text.splitlines() if line.strip()]
  return lines[-1] if lines else ''


def run_rl_logged(config_files, output_dir, seed, bindings, log_path, started=None,
                  allow_config_change=False, compilation_cache_dir=None, seeds=None,
                  grid=None):
  """Runs `python -m rl.run` to its end; returns None if it finished, else its error line.

  The command is built here, where it runs (on a Ray node that is the node's
  own Python); paths should already be absolute. stdout goes to `log_path`
  (rl.run also keeps log.txt inside its folder); stderr is kept for its last
  line, the error rl.run reports, then appended to the log. The log is
  appended to, after a line with the date and the command, so a rerun that
  resumes the run keeps the earlier invocations' output. `started` is called
  with the Popen once the child runs, so a caller can stop it. With `seeds`
  (and seed None) one rl.run trains them all, into <output_dir>/seed_<n>, and with
  `grid` too every cell of it (rl_run_command).
  """
  command = rl_run_command(config_files, output_dir, seed, bindings, allow_config_change,
                           compilation_cache_dir, seeds, grid)
  os.makedirs(os.path.dirname(log_path), exist_ok=True)
  with open(log_path, 'a') as log:
    now = datetime.datetime.now().astimezone().isoformat(timespec='seconds')
    log.write(f'=== {now} {shlex.join(command)}\n')
    log.flush()  # before the child writes to the same file
    try:
      process = subprocess.Popen(
          command, stdout=log, stderr=subprocess.PIPE, text=True, errors='replace',
          cwd=REPO_ROOT, env=child_env(),
          # Its own session: a terminal's Ctrl-C reaches the sweep alone, which
          # stops each run with one SIGTERM (a second would stop it at once).
          start_new_session=True,
          preexec_fn=_die_with_parent if _LIBC is not None else None)
    except OSError as e:  # the process could not even start
      return f'cannot start rl.run: {e}'
    if started is not None:
      started(process)
    _, stderr = process.communicate()
    log.write(stderr)
  if process.returncode == 0:
    return None
  if process.returncode < 0:
    return f'rl.run was stopped by {signal.Signals(-process.returncode).name}'
  return last_line(stderr) or f'rl.run exited with status {process.returncode}'
