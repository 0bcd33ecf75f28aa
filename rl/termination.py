"""Ctrl-C and SIGTERM in the command-line programs (rl.run, rl.evaluate, launch.sweep).

`kill`, Slurm and Kubernetes stop a process with SIGTERM, whose default action
ends Python without a word. `stop_on_sigterm` makes it raise `Terminated`, a
KeyboardInterrupt, where the interpreter next runs Python code (as it raises
KeyboardInterrupt for Ctrl-C), so every handler of Ctrl-C handles it too: the
run stops with its one line and its folder as Ctrl-C leaves it. The exit
status is the shell's for the signal: 130 (128 + SIGINT) after Ctrl-C, 143
(128 + SIGTERM) after SIGTERM.

While a run trains (`epoch_finishes_first`), the first Ctrl-C or SIGTERM
only asks the run to stop: the epoch under way finishes, a checkpoint of it
is written, and then the run stops with its one line (rl.learner.loop), so a
rerun resumes from the last completed epoch. That takes at most the rest of
one epoch (a JAX-native call's epochs are computed already) and a
checkpoint's write. A second signal stops the run at once, as above, from
the last checkpoint on disk.
"""
import contextlib
import os
import signal
import threading

SIGINT_STATUS = 128 + signal.SIGINT
SIGTERM_STATUS = 128 + signal.SIGTERM


class Terminated(KeyboardInterrupt):
  """SIGTERM arrived; handled wherever Ctrl-C's KeyboardInterrupt is."""


_received = []
# The signal that asked a training run to stop after its epoch, once one did.
_stop_asked = []


def _raise_terminated(signum, frame):
  del frame
  _received.append(signum)
  # A second SIGTERM (a scheduler may repeat it) would cut short the clean-up
  # that the first one started: closing the run's files and its lock.
  signal.signal(signal.SIGTERM, signal.SIG_IGN)
  raise Terminated


def stop_on_sigterm():
  """Makes SIGTERM raise Terminated in the main thread (call it from there)."""
  signal.signal(signal.SIGTERM, _raise_terminated)


def cause():
  """What to put before an interrupted program's line: 'SIGTERM: ' once SIGTERM arrived."""
  return 'SIGTERM: ' if _received else ''


def exit_status():
  """The exit status of an interrupted program: 143 after SIGTERM, else 130."""
  return SIGTERM_STATUS if _received else SIGINT_STATUS


def stop_asked():
  """Whether a Ctrl-C or SIGTERM asked the training run to stop after its epoch."""
  return bool(_stop_asked)


def _stop_now(signum, frame):
  """The second signal: stops at once, as outside training."""
  if signum == signal.SIGTERM:
    _raise_terminated(signum, frame)
  signal.signal(signal.SIGTERM, signal.SIG_IGN)  # the clean-up under way, as above
  raise KeyboardInterrupt


def _ask_to_stop(program):
  def handler(signum, frame):
    del frame
    _stop_asked.append(signum)
    if signum == signal.SIGTERM:
      _received.append(signum)
    signal.signal(signal.SIGINT, _stop_now)
    signal.signal(signal.SIGTERM, _stop_now)
    name = 'SIGTERM' if signum == signal.SIGTERM else 'Ctrl-C'
    # To the console, as the epoch lines. os.write: the main thread may be inside
    # a write to sys.stdout, which a buffered write from this handler would re-enter.
    os.write(1, f'{program}: {name}: stopping after the epoch under way, once its checkpoint '
                'is written; Ctrl-C again stops at once, from the last checkpoint.\n'.encode())
  return handler


@contextlib.contextmanager
def epoch_finishes_first(program='rl.run'):
  """Within the block, the first Ctrl-C or SIGTERM sets `stop_asked()` instead of raising.

  Only in the main thread, where signal handlers run; elsewhere the block
  changes nothing. The handlers before it are restored at its end (SIGTERM's
stays ignored once one arrived).
  """
  if threading.current_thread() is not threading.main_thread():
    yield
    return
  before = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
  _stop_asked.clear()
  handler = _ask_to_stop(program)
  for s in before:
    signal.signal(s, handler)
  try:
    yield
  finally:
    for s, previous in before.items():
      # After a SIGTERM, another one stays ignored until the clean-up is done.
      signal.signal(s, signal.SIG_IGN if s == signal.SIGTERM and _received else previous)
