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
import re
import sys
import tempfile

from rl.errors import ConfigError
from rl.errors import OutputDirError
from rl.errors import WriteFailed
from rl.errors import write_failure_reason

CHECKPOINT_DIR = 'checkpoints'
CONFIG_FILE = 'config.gin'
LOCK_FILE = '.lock'
LOG_FILE = 'log.txt'
# The folder of each seed of `rl.run --seeds`, under the folder --output_dir names.
SEED_FOLDER = 'seed_{}'
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


class _LogFile(logging.FileHandler):
  """log.txt, whose failed write (a full disk) stops the run with WriteFailed.

  logging's own handling prints a traceback on stderr for each line and goes on.
  """

  def handleError(self, record):
    error = sys.exc_info()[1]
    if not isinstance(error, OSError):
      super().handleError(record)
      return
    raise WriteFailed(self.baseFilename, write_failure_reason(error))


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
  log_file = _LogFile(os.path.join(output_dir, LOG_FILE))
  log_file.setFormatter(logging.Formatter('%(asctime)s %(message)s'))
  logger.addHandler(log_file)
  return logger


def save_config(output_dir, operative_config):
  """Writes the config the run uses, which a resume from the folder alone reads.

  Written aside and renamed over the old one: a write that fails (a full
  disk) leaves the config a resume needs as it was.
  """
  path = os.path.join(output_dir, CONFIG_FILE)
  tmp = path + '.tmp'
  try:
    with open(tmp, 'w') as f:
      f.write(operative_config)
    os.replace(tmp, path)
  except OSError as e:
    with contextlib.suppress(OSError):
      os.remove(tmp)
    raise WriteFailed(path, write_failure_reason(e)) from None


def saved_config(output_dir):
  """The config.gin of the run in `output_dir`, to resume it without its config files."""
  if output_dir is None:
    raise ConfigError('give --config_file=<file.gin> to start a run, or --output_dir=<run '
                      'folder> to resume one.')
  path = os.path.join(output_dir, CONFIG_FILE)
  if not os.path.isfile(path):
    seeds = seeds_in(output_dir)
    if seeds:
      raise OutputDirError(f"'{output_dir}' holds the seed folders of a --seeds run, not one "
                           f'run; resume them with --output_dir={output_dir} '
                           f'--seeds={seeds_flag(seeds)}.')
    raise OutputDirError(f"'{output_dir}' holds no run to resume (no {CONFIG_FILE}); give "
                         '--config_file=<file.gin> to start one there.')
  return path


def seed_folder(parent, seed):
  """Where seed `seed` of a --seeds run in `parent` lives."""
  return os.path.join(parent, SEED_FOLDER.format(seed))


def seeds_in(parent):
  """The sorted seeds whose run folders (with their config.gin) `parent` holds."""
  pattern = re.compile(SEED_FOLDER.format(r'(\d+)'))
  names = os.listdir(parent) if os.path.isdir(parent) else []
  return sorted(int(m.group(1)) for m in map(pattern.fullmatch, names)
                if m and os.path.isfile(os.path.join(parent, m.group(0), CONFIG_FILE)))


def seeds_flag(seeds):
  """The --seeds value naming sorted `seeds`, runs of consecutive ones as ranges: '0-3,7'."""
  parts, start = [], 0
  for i, seed in enumerate(seeds):
    if i + 1 == len(seeds) or seeds[i + 1] != seed + 1:
      parts.append(str(seeds[start]) if start == i else f'{seeds[start]}-{seed}')
      start = i + 1
  return ','.join(parts)


def check_seeds_parent(path):
  """Refuses to put seed folders inside the folder of a single run."""
  if os.path.isfile(os.path.join(path, CONFIG_FILE)):
    raise OutputDirError(f"'{path}' holds a single run ({CONFIG_FILE}), and --seeds would nest "
                         'its seed folders inside it; pass another --output_dir for the seeds, '
                         'or resume that run without --seeds.')


def last_checkpoint(checkpointer):
  """The epoch of the newest checkpoint on disk, or None."""
  return max(checkpointer.all_steps(), default=None)


def interrupted_message(output_dir, epoch, n_epochs, checkpoint_epoch):
  """Where a Ctrl-C stopped the run and what a rerun of the same command does.

  epoch: the epoch in progress; a run that checkpointed the epoch before it
  (rl.termination: it finished its epoch first) lost nothing.
  """
  where = f'interrupted in epoch {epoch}/{n_epochs}'
  if checkpoint_epoch is not None and checkpoint_epoch == epoch - 1:
    path = os.path.join(output_dir, CHECKPOINT_DIR, str(checkpoint_epoch))
    return (f'stopped after epoch {checkpoint_epoch}/{n_epochs}, checkpointed ({path}): rerun '
            'the same command to resume from it.')
  if checkpoint_epoch is None:
    return f'{where}; no checkpoint was written yet: rerun the same command to start it again.'
  path = os.path.join(output_dir, CHECKPOINT_DIR, str(checkpoint_epoch))
  return (f'{where}; the last checkpoint is epoch {checkpoint_epoch} ({path}): rerun the same '
          'command to resume from it.')


def after_write_failure(checkpoint_epoch):
  """What a rerun does after a failed write, true to the run's checkpoints."""
  if checkpoint_epoch is None:
    return 'no checkpoint was written yet: free space and rerun the same command to start again.'
  return (f'free space and rerun the same command to resume from epoch {checkpoint_epoch}, '
          'the last good checkpoint.')
