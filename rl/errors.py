"""Errors that reach the user as one line: what is wrong and how to fix it.

The runner prints `str(error)` of these without a traceback and exits non-zero,
so every message must stand on its own and name the fix.
"""
import contextlib
import os
import re


class UserError(Exception):
  """Bad input from the user (config, flags, env id, output folder)."""


class ConfigError(UserError, ValueError):
  """A gin config that cannot run (unknown binding, bad value, bad combination).

  Also a ValueError: it is raised for bad argument values, and callers of the
  library (not the runner) may catch it as one.
  """


class OutputDirError(UserError):
  """The output folder cannot be used (a file, not writable, locked, or a different run)."""


class NonFiniteLossError(RuntimeError):
  """A loss or metric became NaN or infinite during training.

  `what_now`: what became of the run and what to change; the runner knows
  (its checkpoints, its clipping), the trainer that raises this does not.
  """

  def __init__(self, metric, value, step, what_now=None):
    self.metric = metric
    self.value = value
    self.step = step
    super().__init__(
        f"training stopped: '{metric}' became {value} at train step {step}; "
        + (what_now or 'lower the learning rate or clip the gradients.'))


class Interrupted(Exception):
  """The run was stopped by Ctrl-C; the message says where, and how to resume."""


class WriteFailed(RuntimeError):
  """A file of the run could not be written: a full disk, a quota, a file-size limit.

  `what_now`: what the folder holds and how to go on; the runner knows (its
  checkpoints), the writer that raises this does not.
  """

  def __init__(self, what, reason, what_now=None):
    self.what = what
    self.reason = reason
    super().__init__(f'could not write {what}: {reason}; '
                     + (what_now or 'free space and rerun the same command.'))


def write_failure_reason(error):
  """The cause of a failed write in a few words: the OS error's text where there is one.

  tensorstore (under orbax) reports the OS error as os_error_code='27' in a
  ValueError's text rather than as an OSError.
  """
  if isinstance(error, OSError) and error.strerror:
    return error.strerror
  match = re.search(r"os_error_code='?(\d+)", str(error))
  if match:
    return os.strerror(int(match.group(1)))
  return (str(error).splitlines() or [type(error).__name__])[0][:200]


@contextlib.contextmanager
def one_line_errors(current, interrupted):
  """Turns Ctrl-C, a NaN stop and a failed write inside the block into their one-line errors.

  current() is the PreparedRun in progress, whose checkpoints say what a
  rerun can do; interrupted() the Interrupted error of a Ctrl-C now. Single
  runs (rl.experiment.train) and --seeds batches (rl.seeds.train_together)
  share it.
  """
  try:
    yield
  except KeyboardInterrupt:
    raise interrupted() from None
  except NonFiniteLossError as e:
    raise current().non_finite(e) from None
  except WriteFailed as e:
    raise current().write_failed(e) from None
