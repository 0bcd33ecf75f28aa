"""`python -m rl.run ARGS` called in the test's own process, as a CompletedProcess.

A new process costs a JAX import (about 3 s on the 2-core machine) before it
does anything, and most command-line tests check what the program says and
leaves (messages, exit codes, warnings, folders), not the process. `run`
parses the flags with rl.run's own parser on a FlagValues of rl.run's flags
alone (the suite also imports launch.sweep, whose flags of the same names
differ), calls `main`, and returns its exit status and what it printed.
Python's default warning filters apply during the call, so a warning shows
on stderr as it would in a new process.

Tests about the process itself (signals, `os._exit`, the line printed before
JAX is imported, the environment, XLA's threads) start one instead
(run_helpers.cli_process).
"""
import contextlib
import io
import logging
import os
import re
import signal
import subprocess
import sys
import warnings

from absl import flags

from rl import run as run_lib
from rl import termination

# The repository root: the calls run there, as run_helpers.cli_process's processes do.
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _exit_status(code):
  if code is None:
    return 0
  if isinstance(code, int):
    return code
  print(code, file=sys.stderr)  # sys.exit('message') prints it and exits 1
  return 1


@contextlib.contextmanager
def _default_warnings():
  """Python's filters for a new process (`python -m`): deprecations shown only in __main__."""
  with warnings.catch_warnings():
    warnings.resetwarnings()
    warnings.simplefilter('default')
    for category in (DeprecationWarning, PendingDeprecationWarning, ImportWarning,
                     ResourceWarning):
      warnings.simplefilter('ignore', category)
    warnings.filterwarnings('default', category=DeprecationWarning, module='__main__')
    yield


@contextlib.contextmanager
def _root_warnings_to(stream):
  """Root-logger warnings (rl.data.checkpoints') reach `stream`, as absl's stderr handler does."""
  handler = logging.StreamHandler(stream)
  handler.setLevel(logging.WARNING)
  root = logging.getLogger()
  root.addHandler(handler)
  try:
    yield
  finally:
    root.removeHandler(handler)


def _closed_gate(args):
  """Whether a config file given holds its run at a closed gate (tests/sweep_gate.py).

  The gate counts its process's checkpoint saves and reads its --output_dir, so
  it holds processes only; with the gate file there it is CartPole-v1.
  """
  for arg in args:
    path = arg.split('=', 1)[1] if arg.startswith('--config_file=') else None
    if path and os.path.isfile(path):
      with open(path, encoding='utf-8') as f:
        gate = re.search(r"[\"']gate[\"']: '([^']+)'", f.read())
      if gate and not os.path.exists(gate.group(1)):
        return True
  return False


def run(*args):
  """rl.run's `main` on `args` in this process: CompletedProcess(args, status, stdout, stderr)."""
  assert not _closed_gate(args), 'a run held at a closed gate needs a process: cli_process'
  own = flags.FlagValues()
  run_lib.define_flags(own)
  stdout, stderr = io.StringIO(), io.StringIO()
  sigterm = signal.getsignal(signal.SIGTERM)
  received = list(termination._received)  # pylint: disable=protected-access
  module_flags = run_lib.FLAGS
  run_lib.FLAGS = own
  status = 0
  try:
    with contextlib.chdir(ROOT), contextlib.redirect_stdout(stdout), \
        contextlib.redirect_stderr(stderr), _default_warnings(), _root_warnings_to(stderr):
      try:
        argv = run_lib.flags_parser('rl.run')(['rl.run', *args])
        run_lib.main(argv)
      except SystemExit as e:
        status = _exit_status(e.code)
  finally:
    run_lib.FLAGS = module_flags
    signal.signal(signal.SIGTERM, sigterm)
    termination._received[:] = received  # pylint: disable=protected-access
  return subprocess.CompletedProcess(['rl.run', *args], status, stdout.getvalue(),
                                     stderr.getvalue())
