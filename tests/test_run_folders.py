"""Reruns on an existing run folder: resume, extend, and the folders and configs refused.

A rerun of a finished run changes nothing and adds no files, a higher
n_epochs extends it, and `--output_dir` alone resumes a run from its saved
config; a folder holding no run, an output path that is a file or cannot be
written, a changed config (without --allow_config_change), an n_epochs below
the epochs done and a folder locked by a running run are refused, each
leaving the folder as it was.
"""
import os
import shutil

import pytest

from rl import experiment
from rl import run_folder
from rl.errors import ConfigError
from rl.errors import OutputDirError
from rl.metrics import read_metrics
import run_helpers
from run_helpers import REINFORCE
from run_helpers import TINY
from run_helpers import assert_one_line_error
from run_helpers import cli


def snapshot(folder):
  return run_helpers.snapshot(folder, ignore=('.lock',))


def test_rerun_of_a_finished_run_changes_nothing_and_extending_continues(finished_run):
  before = read_metrics(finished_run)
  experiment.execute([REINFORCE], TINY, finished_run)
  assert read_metrics(finished_run) == before
  trainer = experiment.execute([REINFORCE], TINY + ['train_rl.n_epochs = 4'], finished_run)
  assert trainer.epoch == 4
  assert [r['epoch'] for r in read_metrics(finished_run)] == [1, 2, 3, 4]


def test_cli_rerun_of_a_finished_run_adds_no_files(finished_run):
  before = snapshot(finished_run)
  # Another test of this module may have extended the shared run.
  done = len(read_metrics(finished_run))
  result = cli(f'--config_file={REINFORCE}', f'--output_dir={finished_run}',
               *[f'--config={b}' for b in TINY + [f'train_rl.n_epochs = {done}']])
  assert result.returncode == 0, result.stderr
  assert not [l for l in result.stdout.splitlines() if l.startswith('epoch ')]
  after = snapshot(finished_run)
  # No epoch ran: no new (empty) TensorBoard event file, nothing else new.
  assert sorted(after) == sorted(before)
  assert len(os.listdir(os.path.join(finished_run, 'tensorboard'))) == len(
      [p for p in before if p.startswith('tensorboard' + os.sep)])


def test_cli_resumes_a_run_from_its_folder_alone(finished_run, tmp_path):
  run = tmp_path / 'run'
  shutil.copytree(finished_run, run)
  before = read_metrics(run)
  done = len(before)
  result = cli(f'--output_dir={run}')
  assert result.returncode == 0, result.stderr
  assert f'{run} is already complete: {done}/{done} epochs' in result.stdout
  assert read_metrics(run) == before
  # --config bindings on top behave as with a config file: a change is refused...
  unchanged = snapshot(run)
  refused = cli(f'--output_dir={run}', '--config=RLTask.gamma = 0.9')
  assert_one_line_error(refused, 'RLTask.gamma: 0.99 -> 0.9', '--allow_config_change')
  assert refused.returncode == 2
  assert snapshot(run) == unchanged
  # ... and a higher n_epochs extends the run.
  extended = cli(f'--output_dir={run}', f'--config=train_rl.n_epochs = {done + 1}')
  assert extended.returncode == 0, extended.stderr
  assert [r['epoch'] for r in read_metrics(run)] == list(range(1, done + 2))
  # The original command still resumes it: the saved config spells out the
  # defaults its config file leaves unset, which is no change.
  trainer = experiment.execute([REINFORCE], TINY + [f'train_rl.n_epochs = {done + 1}'], str(run))
  assert trainer.epoch == done + 1


@pytest.mark.parametrize('exists', [False, True])
def test_cli_output_dir_alone_without_a_run_says_so(tmp_path, exists):
  out = tmp_path / 'x'
  if exists:
    out.mkdir()
  before = snapshot(tmp_path)
  result = cli(f'--output_dir={out}')
  assert_one_line_error(result, f"'{out}' holds no run to resume", '--config_file=')
  assert result.returncode == 2
  assert snapshot(tmp_path) == before


def test_output_dir_that_is_a_file(tmp_path):
  path = tmp_path / 'file'
  path.write_text('keep me')
  with pytest.raises(OutputDirError, match='is a file'):
    experiment.execute([REINFORCE], TINY, str(path))
  assert path.read_text() == 'keep me'


def test_output_dir_not_writable():
  target = '/sys/rl-test-output'
  try:
    os.mkdir(target)
    os.rmdir(target)
    pytest.skip('this machine lets us write to /sys; no unwritable folder to test with')
  except OSError:
    pass
  with pytest.raises(OutputDirError, match='not writable'):
    experiment.execute([REINFORCE], TINY, target)


def test_changed_config_is_refused_with_the_differing_binding(finished_run):
  before = snapshot(finished_run)
  with pytest.raises(OutputDirError, match=r'RLTask.gamma: 0.99 -> 0.9'):
    experiment.execute([REINFORCE], TINY + ['RLTask.gamma = 0.9'], finished_run)
  assert snapshot(finished_run) == before


def test_n_epochs_below_finished_epochs(finished_run):
  before = snapshot(finished_run)
  done = len(read_metrics(finished_run))
  with pytest.raises(ConfigError, match=f'lower than the {done} epochs'):
    experiment.execute([REINFORCE], TINY + ['train_rl.n_epochs = 1'], finished_run)
  assert snapshot(finished_run) == before


def test_second_run_on_a_busy_folder_is_refused(tmp_path):
  out = tmp_path / 'busy'
  out.mkdir()
  with run_folder.folder_lock(str(out)):
    with pytest.raises(OutputDirError, match='in use by a running run'):
      experiment.execute([REINFORCE], TINY, str(out))
