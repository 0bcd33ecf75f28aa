"""A write that finds no room (a full disk, a quota, `ulimit -f`) stops a run in one line.

In-process, a write is made to fail by a file-size limit (RLIMIT_FSIZE, what
`ulimit -f` sets; Python ignores the SIGXFSZ that comes with it, so the write
fails with EFBIG) or by /dev/full (ENOSPC). The command-line test runs rl.run
under `ulimit -f`.
"""
import contextlib
import errno
import logging
import os
import resource
import subprocess
import sys

import numpy as np
import pytest

from rl import run_folder
from rl.data.checkpoints import Checkpointer
from rl.errors import WriteFailed
from rl.errors import write_failure_reason
from rl.metrics import MetricsWriter
from rl.metrics import read_metrics
from run_helpers import REINFORCE
from run_helpers import ROOT
from run_helpers import TINY
from run_helpers import cli


@contextlib.contextmanager
def file_size_limit(n_bytes):
  """Writes past `n_bytes` of a file fail with EFBIG in this process while inside."""
  soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
  resource.setrlimit(resource.RLIMIT_FSIZE, (n_bytes, hard))
  try:
    yield
  finally:
    resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))


def test_a_failed_checkpoint_leaves_no_part_of_it_and_the_last_good_one_restores(tmp_path):
  checkpointer = Checkpointer(str(tmp_path / 'checkpoints'))
  small = {'w': np.arange(10, dtype=np.float32)}
  checkpointer.save(1, small, {'epoch': 1})
  big = {'w': np.random.default_rng(0).random(1 << 18).astype(np.float32)}  # 1 MiB
  with pytest.raises(WriteFailed) as failure, file_size_limit(64 << 10):
    checkpointer.save(2, big, {'epoch': 2})
  message = str(failure.value)
  assert message.startswith(f"could not write checkpoint 2 to {tmp_path / 'checkpoints'}: "
                            f'{os.strerror(errno.EFBIG)};'), message
  assert '\n' not in message
  checkpointer.close()
  assert os.listdir(tmp_path / 'checkpoints') == ['1']
  step, arrays, meta = Checkpointer(str(tmp_path / 'checkpoints')).restore_latest()
  assert step == 1 and meta['epoch'] == 1
  np.testing.assert_array_equal(arrays['w'], small['w'])


def test_a_background_checkpoint_that_fails_is_reported_by_the_next_wait(tmp_path):
  absl_level = logging.getLogger('absl').level  # quiet while orbax writes, then restored
  checkpointer = Checkpointer(str(tmp_path / 'checkpoints'), background=True)
  small = {'w': np.arange(10, dtype=np.float32)}
  checkpointer.save(1, small, {'epoch': 1})
  big = {'w': np.random.default_rng(0).random(1 << 18).astype(np.float32)}  # 1 MiB
  with pytest.raises(WriteFailed) as failure, file_size_limit(64 << 10):
    checkpointer.save(2, big, {'epoch': 2})  # returns while the write goes on...
    big['w'][:] = 0  # ...from a copy: the caller's arrays are its own again
    checkpointer.wait()
  assert str(failure.value).startswith(
      f"could not write checkpoint 2 to {tmp_path / 'checkpoints'}: {os.strerror(errno.EFBIG)};")
  assert logging.getLogger('absl').level == absl_level
  checkpointer.save(3, small, {'epoch': 3})
  checkpointer.close()  # finishes the write of 3
  assert sorted(os.listdir(tmp_path / 'checkpoints')) == ['1', '3']
  step, arrays, meta = Checkpointer(str(tmp_path / 'checkpoints')).restore_latest()
  assert step == 3 and meta['epoch'] == 3


def test_a_failed_metrics_write_raises_write_failed_and_closes_quietly(tmp_path):
  writer = MetricsWriter(str(tmp_path))
  writer.write({'epoch': 1, 'env_steps': 10, 'loss': 0.5})
  size = os.path.getsize(tmp_path / 'metrics.jsonl')
  with pytest.raises(WriteFailed) as failure, file_size_limit(size):
    writer.write({'epoch': 2, 'env_steps': 20, 'loss': 0.25})
  assert str(failure.value).startswith(
      f"could not write {tmp_path / 'metrics.jsonl'}: {os.strerror(errno.EFBIG)};")
  writer.close()  # the unwritten record does not fail it again
  assert read_metrics(str(tmp_path)) == [{'epoch': 1, 'env_steps': 10, 'loss': 0.5}]


def test_a_failed_tensorboard_write_raises_write_failed_and_closes_quietly(tmp_path, monkeypatch):
  from rl.metrics import EventFile  # pylint: disable=import-outside-toplevel
  monkeypatch.setattr(EventFile, 'FLUSH_SECONDS', 0.0)  # every event reaches the file at once
  writer = MetricsWriter(str(tmp_path))
  writer.write({'epoch': 1, 'env_steps': 10, 'loss': 0.5})
  (events,) = os.listdir(tmp_path / 'tensorboard')
  size = os.path.getsize(tmp_path / 'tensorboard' / events)
  # Room for metrics.jsonl's next record, not for the next event.
  with pytest.raises(WriteFailed) as failure, file_size_limit(size + 8):
    writer.write({'epoch': 2, 'env_steps': 20, 'loss': 0.25})
  assert str(failure.value).startswith(
      f"could not write {tmp_path / 'tensorboard'}: {os.strerror(errno.EFBIG)};")
  writer.close()  # the unwritten event does not fail it again
  assert os.path.getsize(tmp_path / 'tensorboard' / events) <= size + 8


def test_a_run_stopped_by_a_failed_write_reports_that_write_not_the_closing_one(
    tmp_path, monkeypatch):
  # On a full disk the event files' last flush, as the run closes, fails too.
  from rl import experiment  # pylint: disable=import-outside-toplevel
  from rl.metrics import EventFile  # pylint: disable=import-outside-toplevel
  add_scalars = EventFile.add_scalars

  def failing_at_epoch_2(self, values, step):
    if dict(values)['epoch'] == 2:
      raise WriteFailed('the event file', 'No space left on device')
    add_scalars(self, values, step)

  def failing_close(self):
    raise WriteFailed('the event file at close', 'No space left on device')
  monkeypatch.setattr(EventFile, 'add_scalars', failing_at_epoch_2)
  monkeypatch.setattr(EventFile, 'close', failing_close)
  with pytest.raises(WriteFailed) as failure:
    experiment.execute([REINFORCE], TINY, str(tmp_path))
  assert str(failure.value).startswith('could not write the event file: No space left on device;')
  assert 'resume from epoch 1' in str(failure.value)
  assert os.listdir(tmp_path / 'checkpoints') == ['1']  # the checkpointer was closed all the same


def test_a_failed_log_write_raises_write_failed(tmp_path):
  os.symlink('/dev/full', tmp_path / run_folder.LOG_FILE)
  log = run_folder.setup_logging(str(tmp_path))
  try:
    with pytest.raises(WriteFailed, match=f'could not write {tmp_path / "log.txt"}: '
                       f'{os.strerror(errno.ENOSPC)};'):
      log.info('epoch 1/3')
  finally:
    for handler in list(log.handlers):
      log.removeHandler(handler)
      with contextlib.suppress(OSError):
        handler.close()


def test_orbax_reports_the_os_error_as_a_code_in_its_text():
  # What tensorstore raises under orbax for a full file system.
  error = ValueError('OUT_OF_RANGE: Error writing "x": Failed to write 1504 bytes to file 17: '
                     "File too large [os_error_code='27']\nmore")
  assert write_failure_reason(error) == os.strerror(27)
  assert write_failure_reason(OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))) == \
      os.strerror(errno.ENOSPC)


def test_cli_full_disk_is_one_line_and_a_rerun_resumes_from_the_last_good_checkpoint(tmp_path):
  out = tmp_path / 'run'
  args = [f'--config_file={REINFORCE}', f'--output_dir={out}',
          *[f'--config={b}' for b in TINY]]
  first = cli(*args, '--config=train_rl.n_epochs = 1')
  assert first.returncode == 0, first.stderr
  # Extended under a 20 KiB file-size limit: its checkpoints (about 60 KiB of
  # arrays) cannot be written, its small files (config, log, metrics) can.
  limited = subprocess.run(['bash', '-c', 'ulimit -f 20 && exec "$@"', 'bash', sys.executable,
                            '-m', 'rl.run', *args], cwd=ROOT, capture_output=True, text=True,
                           timeout=240)
  assert limited.returncode == 1, limited.stderr
  lines = limited.stderr.strip().splitlines()
  assert lines == [f"rl.run: error: could not write checkpoint 2 to {out / 'checkpoints'}: "
                   f'{os.strerror(errno.EFBIG)}; free space and rerun the same command to '
                   'resume from epoch 1, the last good checkpoint.'], limited.stderr
  assert os.listdir(out / 'checkpoints') == ['1']

  rerun = cli(*args)
  assert rerun.returncode == 0, rerun.stderr
  assert f'Resuming {out} from epoch 1/' in rerun.stdout
  assert [r['epoch'] for r in read_metrics(str(out))] == [1, 2, 3]


def test_a_failed_config_write_keeps_the_saved_config(tmp_path):
  (tmp_path / 'config.gin').write_text('RLTask.seed = 0\n')
  os.symlink('/dev/full', tmp_path / 'config.gin.tmp')
  with pytest.raises(WriteFailed, match=f'could not write {tmp_path / "config.gin"}: '):
    run_folder.save_config(str(tmp_path), 'RLTask.seed = 1\n')
  assert (tmp_path / 'config.gin').read_text() == 'RLTask.seed = 0\n'
  assert sorted(os.listdir(tmp_path)) == ['config.gin']
