"""`python -m rl.run ARGS` (rl.evaluate, rl.report, launch.sweep) called in the test's process.

A new process costs a JAX import (about 3 s on the 2-core machine) before it
does anything, and most command-line tests check what the program says and
leaves (messages, exit codes, warnings, folders), not the process. `run`
parses the flags with rl.run's parser on a FlagValues of the program's flags
alone (the suite also imports launch.sweep, whose flags of the same names
differ), calls the program's `main`, and returns a CompletedProcess with its
exit status and what it printed. Python's default warning filters apply
during the call, so a warning shows on stderr as it would in a new process.

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

import jax

from launch import sweep
from rl import evaluate
from rl import report
from rl import run as run_lib
from rl import termination

# The repository root: the calls run there, as run_helpers.cli_process's processes do.
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# Each program's module, and the modules whose define_flags make its flags, in order.
PROGRAMS = {'rl.run': (run_lib, [run_lib]), 'rl.evaluate': (evaluate, [run_lib, evaluate]),
            'rl.report': (report, [report]), 'launch.sweep': (sweep, [sweep])}
# Process-wide settings a program may change (rl.cpu_client), restored after a call.
JAX_SETTINGS = ('jax_cpu_enable_async_dispatch',)


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


def run(*args, program='rl.run'):
  """`python -m PROGRAM *args` in this process: CompletedProcess(args, status, stdout, stderr)."""
  assert not _closed_gate(args), 'a run held at a closed gate needs a process: cli_process'
  module, defining = PROGRAMS[program]
  own = flags.FlagValues()
  for definer in defining:
    definer.define_flags(own)
  stdout, stderr = io.StringIO(), io.StringIO()
  sigterm = signal.getsignal(signal.SIGTERM)
  received = list(termination._received)  # pylint: disable=protected-access
  settings = {name: jax.config.read(name) for name in JAX_SETTINGS}
  module_flags = {m: m.FLAGS for m in (module, run_lib)}
  for m in module_flags:
    m.FLAGS = own
  status = 0
  try:
    with contextlib.chdir(ROOT), contextlib.redirect_stdout(stdout), \
        contextlib.redirect_stderr(stderr), _default_warnings(), _root_warnings_to(stderr):
      try:
        argv = run_lib.flags_parser(program)([program, *args])
        module.main(argv)
      except SystemExit as e:
        status = _exit_status(e.code)
  finally:
    for m, values in module_flags.items():
      m.FLAGS = values
    signal.signal(signal.SIGTERM, sigterm)
    termination._received[:] = received  # pylint: disable=protected-access
    for name, value in settings.items():
      jax.config.update(name, value)
  return subprocess.CompletedProcess([program, *args], status, stdout.getvalue(),
                                     stderr.getvalue())
