"""rl.evaluate: re-evaluating a checkpoint reproduces the logged eval; bad input is one line."""
import os
import subprocess
import sys

import imageio_ffmpeg  # the test extra includes the video extra, which brings it
import pytest

import in_process
from rl.envs import vector_envs
from rl import evaluate as evaluate_lib
from rl.errors import ConfigError
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


def test_a_seeds_parent_folder_names_its_seeds(tmp_path):
  for seed in (0, 1, 2, 5):
    (tmp_path / f'seed_{seed}').mkdir()
    (tmp_path / f'seed_{seed}' / 'config.gin').write_text('RLTask.seed = 0\n')
  with pytest.raises(OutputDirError) as raised:
    evaluate_lib.evaluate_run(str(tmp_path))
  assert str(raised.value) == (
      f"'{tmp_path}' holds the runs of --seeds=0-2,5, a folder each; evaluate one of them, "
      f"e.g. --output_dir={tmp_path / 'seed_0'}.")


def test_cli_missing_folder_is_one_line_and_exit_2(tmp_path):
  missing = str(tmp_path / 'no_such_run')
  process = in_process.run(f'--output_dir={missing}', program='rl.evaluate')
  assert process.returncode == 2
  lines = process.stderr.strip().splitlines()
  assert len(lines) == 1, process.stderr
  assert lines[0].startswith('rl.evaluate: error:') and missing in lines[0]
  assert not os.path.exists(missing)


def test_cli_output_dir_that_is_a_file_is_named_a_file(tmp_path):
  path = tmp_path / 'metrics.jsonl'
  path.write_text('keep me')
  process = in_process.run(f'--output_dir={path}', program='rl.evaluate')
  assert process.returncode == 2
  lines = process.stderr.strip().splitlines()
  assert len(lines) == 1, process.stderr
  assert f"'{path}' is a file, not a run folder" in lines[0]
  assert 'does not exist' not in lines[0]
  assert path.read_text() == 'keep me'


def test_video_records_the_first_episode_without_changing_returns(finished_run, tmp_path,
                                                                   monkeypatch):
  before = snapshot(finished_run)
  plain = evaluate_lib.evaluate_run(finished_run, n_episodes=2)
  assert plain['video'] is None
  video = str(tmp_path / 'videos' / 'tiny.mp4')  # its folder is created
  result = evaluate_lib.evaluate_run(finished_run, n_episodes=2, video_path=video)
  # Same seeds and dynamics: rendering must not change a single return.
  assert result['returns'] == plain['returns']
  assert result['video'] == video
  assert os.path.getsize(video) > 1000
  # Only the mp4 is left: the temporary recording folder is gone.
  assert os.listdir(tmp_path / 'videos') == ['tiny.mp4']
  # One frame at the reset and one per step; CartPole pays 1 per step. moviepy
  # (which RecordVideo writes with) drops the last frame of some sequences
  # through float rounding of n / fps (e.g. 400 frames at 50 fps become 399).
  n_frames, _ = imageio_ffmpeg.count_frames_and_secs(video)
  length = int(result['returns'][0])
  assert length <= n_frames <= length + 1
  # Otherwise read_frames starts ffmpeg with preexec_fn=os.setpgrp: a Python
  # fork in this JAX (multithreaded) process, which JAX warns may deadlock.
  monkeypatch.setenv('IMAGEIO_FFMPEG_NO_PREVENT_SIGINT', '1')
  frames = imageio_ffmpeg.read_frames(video)
  metadata = next(frames)
  frames.close()
  assert metadata['size'] == (600, 400)
  assert snapshot(finished_run) == before


def test_video_path_must_be_mp4(finished_run, tmp_path):
  video = str(tmp_path / 'tiny.avi')
  with pytest.raises(ConfigError, match=r'must name an \.mp4 file'):
    evaluate_lib.evaluate_run(finished_run, video_path=video)
  assert os.listdir(tmp_path) == []


def test_env_without_rgb_array_rendering_cannot_be_recorded(tmp_path):
  # rl_test/Chain-v0 (conftest) declares no render modes.
  with pytest.raises(ConfigError, match="'rl_test/Chain-v0' cannot render rgb_array"):
    vector_envs.make_vector_env('rl_test/Chain-v0', 1, video_folder=str(tmp_path / 'video'))
  assert os.listdir(tmp_path) == []


def test_cli_video_prints_where_it_went(finished_run, tmp_path):
  video = str(tmp_path / 'tiny.mp4')
  process = subprocess.run(
      [sys.executable, '-m', 'rl.evaluate', f'--output_dir={finished_run}', f'--video={video}'],
      cwd=ROOT, capture_output=True, text=True, timeout=120)
  assert process.returncode == 0, process.stderr
  lines = process.stdout.strip().splitlines()
  assert len(lines) == 2, process.stdout
  first_return = evaluate_lib.evaluate_run(finished_run)['returns'][0]
  n_frames, _ = imageio_ffmpeg.count_frames_and_secs(video)
  assert lines[1] == (f'video of episode 1 (return {first_return:.2f}, {n_frames} frames) '
                      f'written to {video}')
  assert os.path.isfile(video)
  # pygame probes a sound card; on a machine without one ALSA would fill stderr.
  assert 'ALSA' not in process.stderr and 'SDL' not in process.stderr, process.stderr
