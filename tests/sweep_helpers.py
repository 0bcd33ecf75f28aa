"""What the launch.sweep test files (and tests/test_sigterm.py) share.

The sweep's command line in a new process, a free local port, and what a test
reads of a sweep's run folders while the sweep runs or after: whether its
rl.run still holds the folder's lock, the epochs it logged, whether it has a
checkpoint, and the first run held midway at gated_config's gate; a sweep
signalled once a run is held there.
"""
import fcntl
import json
import os
import socket
import subprocess
import sys
import time

import in_process
from run_helpers import ROOT
from run_helpers import default_sigint
from run_helpers import TINY_WITHOUT_ENVS
import sweep_gate

TINY = TINY_WITHOUT_ENVS  # the sweeps' grids set RLTask.n_envs


def cli(*args, timeout=120):
  """`python -m launch.sweep *args` in a new process from the repository root, output captured."""
  return subprocess.run([sys.executable, '-m', 'launch.sweep', *args], cwd=ROOT,
                        capture_output=True, text=True, timeout=timeout)


def refusal(*args):
  """`python -m launch.sweep *args` called in this process, for input refused before any run."""
  return in_process.run(*args, program='launch.sweep')


def free_port():
  with socket.socket() as s:
    s.bind(('127.0.0.1', 0))
    return s.getsockname()[1]


def lock_is_free(run_dir):
  """True once no process holds rl.run's lock on the folder (its rl.run has exited)."""
  with open(os.path.join(run_dir, '.lock'), 'a+') as f:
    try:
      fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
      return False
    fcntl.flock(f, fcntl.LOCK_UN)
    return True


def epochs_logged(run_dir):
  path = os.path.join(run_dir, 'metrics.jsonl')
  if not os.path.exists(path):
    return []
  with open(path) as f:
    return [json.loads(line)['epoch'] for line in f if line.endswith('\n')]


def has_checkpoint(run_dir):
  folder = os.path.join(run_dir, 'checkpoints')
  return os.path.isdir(folder) and any(name.isdigit() for name in os.listdir(folder))


def wait_until_a_run_is_midway(out, sweep, gate, timeout=300):
  """A good run with a checkpoint that has not logged its last epoch; None if none was seen.

  With gated_config's gate closed such a run stays midway, so this cannot miss it;
  it is returned once a run is held at the gate, past its checkpoint's save.
  """
  deadline = time.monotonic() + timeout
  while time.monotonic() < deadline and sweep.poll() is None:
    for seed in (0, 1):
      run_dir = out / f'RLTask.n_envs=4/seed_{seed}'
      if (has_checkpoint(run_dir) and len(epochs_logged(run_dir)) < 3
          and sweep_gate.waiting(gate)):
        return run_dir
    time.sleep(0.05)
  return None


def interrupt_midway(args, out, gate, signum, env=None):
  """Starts `launch.sweep *args` and sends it `signum` once a run is held midway at `gate`.

  Returns (that run's folder, or None if none got there, the sweep's exit
  status, stdout, stderr). A sweep that never got there is killed, and none is
  left running whatever happens.
  """
  sweep = subprocess.Popen([sys.executable, '-m', 'launch.sweep', *args], cwd=ROOT, env=env,
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                           preexec_fn=default_sigint)
  try:
    midway = wait_until_a_run_is_midway(out, sweep, gate)
    if midway is None:
      sweep.kill()
    else:
      sweep.send_signal(signum)
    stdout, stderr = sweep.communicate(timeout=120)
  finally:
    if sweep.poll() is None:  # the test failed midway: no sweep (nor its runs) left behind
      sweep.kill()
      sweep.communicate()
  return midway, sweep.returncode, stdout, stderr
