"""SIGTERM handled as Ctrl-C by the command-line programs (rl.run, rl.evaluate, launch.sweep).

`kill`, Slurm and Kubernetes stop a process with SIGTERM, whose default action
ends Python without a word. `stop_on_sigterm` makes it raise `Terminated`, a
KeyboardInterrupt, where the interpreter next runs Python code (as it raises
KeyboardInterrupt for Ctrl-C), so every handler of Ctrl-C handles it too: the
run stops with its one line and its folder as Ctrl-C leaves it. The exit
status is the shell's for the signal: 130 (128 + SIGINT) after Ctrl-C, 143
(128 + SIGTERM) after SIGTERM.
"""
import signal

SIGINT_STATUS = 128 + signal.SIGINT
SIGTERM_STATUS = 128 + signal.SIGTERM


class Terminated(KeyboardInterrupt):
  """SIGTERM arrived; handled wherever Ctrl-C's KeyboardInterrupt is."""


_received = []


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
