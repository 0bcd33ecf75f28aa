"""Errors that reach the user as one line: what is wrong and how to fix it.

The runner prints `str(error)` of these without a traceback and exits non-zero,
so every message must stand on its own and name the fix.
"""


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
