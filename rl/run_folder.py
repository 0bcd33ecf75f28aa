"""The run folder: where it is, whether it can be written, its lock, its log and saved config.

A run folder holds the operative config a run started with (config.gin),
its checkpoints, metrics, TensorBoard events and log.txt. One process at a
time trains in it (`folder_lock`); a run resumes from it alone
(`saved_config`).
"""
import contextlib
import fcntl
import logging
import os
import sys
import tempfile

from rl.errors import ConfigError
from rl.errors import OutputDirError

CHECKPOINT_DIR = 'checkpoints'
CONFIG_FILE = 'config.gin'
LOCK_FILE = '.lock'
LOG_FILE = 'log.txt'
# A log record's attribute (logging's `extra`) that keeps its line off the
# console: log.txt has every epoch, the console a throttled few (rl.console).
QUIET = 'quiet'


def default_output_dir(config_files):
  """runs/<stem of the first config file>, relative to the working directory."""
  return os.path.join('runs', os.path.splitext(os.path.basename(config_files[0]))[0])


def check_output_dir(path):
  """Fails early if `path` is a file or nothing can be written where it would live.

  The probe is a real write (a temporary folder, removed at once): os.access
  says yes to root even on filesystems that refuse writes.
  """
  if os.path.exists(path) and not os.path.isdir(path):
    raise OutputDirError(f"output folder '{path}' is a file; pass another --output_dir.")
  probe = os.path.abspath(path)
  while not os.path.exists(probe):
    probe = os.path.dirname(probe)
  try:
    os.rmdir(tempfile.mkdtemp(prefix='.rl-write-probe-', dir=probe))
  except OSError as e:
    raise OutputDirError(f"output folder '{path}' is not writable ({e.strerror} in "
                         f"'{probe}'); pass a folder you can write to.") from None


@contextlib.contextmanager
def folder_lock(path):
  """An exclusive lock on the run folder; the OS drops it if the process dies."""
  with open(os.path.join(path, LOCK_FILE), 'a+') as f:
    try:
      fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
      f.seek(0)
      holder = f.read().strip() or 'another process'
      raise OutputDirError(f"output folder '{path}' is in use by a running run "
                           f'(pid {holder}); wait for it or pick another --output_dir.') from None
    f.seek(0)
    f.truncate()
    f.write(str(os.getpid()))
    f.flush()
    try:
      yield
    finally:
      fcntl.flock(f, fcntl.LOCK_UN)


def setup_logging(output_dir, prefix=''):
  """The run's logger: console lines (after `prefix`) and <output_dir>/log.txt.

  A record logged with extra={QUIET: True} goes to log.txt only.

  One logger per folder, so that several runs in one process (--seeds)
  each write their own log.
  """
  logger = logging.getLogger('rl' if not prefix else f'rl.{os.path.abspath(output_dir)}')
  logger.setLevel(logging.INFO)
  logger.propagate = False
  for h in list(logger.handlers):
    logger.removeHandler(h)
  console = logging.StreamHandler(sys.stdout)
  console.addFilter(lambda record: not getattr(record, QUIET, False))
  console.setFormatter(logging.Formatter(prefix.replace('%', '%%') + '%(message)s'))
  logger.addHandler(console)
  log_file = logging.FileHandler(os.path.join(output_dir, LOG_FILE))
  log_file.setFormatter(logging.Formatter('%(asctime)s %(message)s'))
  logger.addHandler(log_file)
  return logger


def save_config(output_dir, operative_config):
  """Writes the config the run uses, which a resume from the folder alone reads."""
  with open(os.path.join(output_dir, CONFIG_FILE), 'w') as f:
    f.write(operative_config)


def saved_config(output_dir):
  """The config.gin of the run in `output_dir`, to resume it without its config files."""
  if output_dir is None:
    raise ConfigError('give --config_file=<file.gin> to start a run, or --output_dir=<run '
                      'folder> to resume one.')
  path = os.path.join(output_dir, CONFIG_FILE)
  if not os.path.isfile(path):
    raise OutputDirError(f"'{output_dir}' holds no run to resume (no {CONFIG_FILE}); give "
                         '--config_file=<file.gin> to start one there.')
  return path


def last_checkpoint(checkpointer):
  """The epoch of the newest checkpoint on disk, or None."""
  return max(checkpointer.all_steps(), default=None)


def interrupted_message(output_dir, epoch, n_epochs, checkpoint_epoch):
  """Where a Ctrl-C stopped the run and what a rerun of the same command does."""
  where = f'interrupted in epoch {epoch}/{n_epochs}'
  if checkpoint_epoch is None:
    return f'{where}; no checkpoint was written yet: rerun the same command to start it again.'
  path = os.path.join(output_dir, CHECKPOINT_DIR, str(checkpoint_epoch))
  return (f'{where}; the last checkpoint is epoch {checkpoint_epoch} ({path}): rerun the same '
          'command to resume from it.')
