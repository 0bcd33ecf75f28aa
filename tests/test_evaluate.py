"""rl.evaluate: re-evaluating a checkpoint reproduces the logged eval; bad input is one line."""
import os
import subprocess
import sys

import pytest

from rl import evaluate as evaluate_lib
from rl.errors import OutputDirError
from rl.metrics import read_metrics
from run_helpers import ROOT
from run_helpers import snapshot

def test_default_evaluation_reproduces_the_last_logged_eval(finished_run):
  before = snapshot(finished_run)
  result = evaluate_lib.evaluate_run(finished_run, n_episodes=2, temperature=0.0)
  last = read_metrics(finished_run)[-1]
  assert result['epoch'] == last['epoch'] == 3
  # Same checkpoint, same seeds: exactly equal, not approximately.
  assert result['mean'] == last['eval_return']
  assert len(result['returns']) == 2
  assert result['min'] == min(result['returns']) and result['max'] == max(result['returns'])
  assert result['min'] <= result['mean'] <= result['max']
  assert result['std'] == pytest.approx(abs(result['returns'][0] - result['returns'][1]) / 2)
  # n_episodes=None falls back to the run's n_eval_episodes (2).
  assert evaluate_lib.evaluate_run(finished_run)['returns'] == result['returns']
  # Nothing written: no lock, no metrics, no checkpoint change.
  assert snapshot(finished_run) == before


def test_more_episodes_at_a_temperature(finished_run):
  result = evaluate_lib.evaluate_run(finished_run, n_episodes=3, temperature=1.0)
  assert len(result['returns']) == 3
  assert all(r >= 1 for r in result['returns'])  # CartPole pays 1 per step


def test_missing_folder_and_missing_checkpoint_raise(tmp_path):
  with pytest.raises(OutputDirError, match='does not exist'):
    evaluate_lib.evaluate_run(str(tmp_path / 'nothing'))
  (tmp_path / 'config.gin').write_text('RLTask.seed = 0\n')
  with pytest.raises(OutputDirError, match='no readable checkpoint'):
    evaluate_lib.evaluate_run(str(tmp_path))
  assert sorted(os.listdir(tmp_path)) == ['config.gin']


def test_cli_missing_folder_is_one_line_and_exit_2(tmp_path):
  missing = str(tmp_path / 'no_such_run')
  process = subprocess.run([sys.executable, '-m', 'rl.evaluate', f'--output_dir={missing}'],
                           cwd=ROOT, capture_output=True, text=True, timeout=120)
  assert process.returncode == 2
  lines = process.stderr.strip().splitlines()
  assert len(lines) == 1, process.stderr
  assert lines[0].startswith('rl.evaluate: error:') and missing in lines[0]
  assert not os.path.exists(missing)
