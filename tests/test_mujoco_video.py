"""rl.evaluate --video of a MuJoCo env: rendered without a display, or one line on what to set."""
import ctypes.util
import os
import subprocess
import sys

import imageio_ffmpeg
import pytest

from rl.envs import mujoco_rendering
from run_helpers import ROOT
from run_helpers import assert_one_line_error
from run_helpers import cli

PPO_PENDULUM = os.path.join(ROOT, 'configs', 'ppo_pendulum.gin')
# One short epoch of PPO on MuJoCo's InvertedPendulum.
TINY_MUJOCO = ["RLTask.env = 'InvertedPendulum-v5'", 'RLTask.n_envs = 2', 'RLTask.time_limit = 20',
               'train_rl.n_epochs = 1', 'PPO.n_interactions_per_epoch = 64',
               'PPO.policy_batch_size = 64', 'PPO.policy_train_steps_per_epoch = 2',
               'PPO.value_train_steps_per_epoch = 2', 'PPO.n_eval_episodes = 1']


@pytest.mark.parametrize('environ, libraries, chosen', [
    ({}, {'EGL', 'OSMesa'}, 'egl'),
    ({}, {'OSMesa'}, 'osmesa'),
    ({}, set(), None),  # rendering fails; video_errors names MUJOCO_GL
    ({'DISPLAY': ':0'}, {'EGL'}, None),  # GLFW, MuJoCo's own default, has a display
    ({'WAYLAND_DISPLAY': 'wayland-0'}, {'EGL'}, None),
    ({'MUJOCO_GL': 'osmesa'}, {'EGL'}, None),  # the user's choice stays
])
def test_a_headless_platform_is_chosen_only_without_display_or_setting(monkeypatch, environ,
                                                                        libraries, chosen):
  monkeypatch.delitem(sys.modules, 'mujoco', raising=False)
  monkeypatch.setattr(ctypes.util, 'find_library', lambda name: name if name in libraries else None)
  given = dict(environ)
  assert mujoco_rendering.choose_gl(given) == chosen
  expected = dict(environ, **({'MUJOCO_GL': chosen} if chosen else {}))
  assert given == expected


@pytest.fixture(scope='module')
def mujoco_run(tmp_path_factory):
  pytest.importorskip('mujoco')
  out = tmp_path_factory.mktemp('mujoco') / 'run'
  result = cli(f'--config_file={PPO_PENDULUM}', f'--output_dir={out}',
               *[f'--config={b}' for b in TINY_MUJOCO])
  assert result.returncode == 0, result.stderr
  return out


def evaluate_video(run, video, **environ):
  env = {k: v for k, v in os.environ.items()
         if k not in ('DISPLAY', 'WAYLAND_DISPLAY', 'MUJOCO_GL')}
  env.update(environ)
  return subprocess.run([sys.executable, '-m', 'rl.evaluate', f'--output_dir={run}',
                         f'--video={video}'], cwd=ROOT, env=env, capture_output=True,
                        text=True, timeout=240)


def test_video_of_a_mujoco_env_without_a_display(mujoco_run, tmp_path):
  if not any(ctypes.util.find_library(lib) for _, lib in mujoco_rendering.HEADLESS_PLATFORMS):
    pytest.skip('neither libEGL nor libOSMesa is installed')
  video = tmp_path / 'pendulum.mp4'
  result = evaluate_video(mujoco_run, video)
  assert result.returncode == 0, result.stderr
  n_frames, _ = imageio_ffmpeg.count_frames_and_secs(str(video))
  assert n_frames > 1
  assert f'frames) written to {video}' in result.stdout


def test_a_platform_that_cannot_render_is_one_line_naming_mujoco_gl(mujoco_run, tmp_path):
  # GLFW needs a display, and there is none in this process's environment.
  video = tmp_path / 'pendulum.mp4'
  result = evaluate_video(mujoco_run, video, MUJOCO_GL='glfw')
  assert_one_line_error(result, 'MUJOCO_GL=glfw', 'set MUJOCO_GL=egl', 'MUJOCO_GL=osmesa')
  assert result.returncode == 2
  assert os.listdir(tmp_path) == []  # no video, no leftover of the recording
