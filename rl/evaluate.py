r"""Re-evaluates a run's latest checkpoint: `python -m rl.evaluate --output_dir=runs/ppo`.

  [--n_episodes=10] [--temperature=0] [--video=ppo.mp4] [--compilation_cache_dir=D]

The run is rebuilt from its saved operative config (<output_dir>/config.gin),
its newest checkpoint restored, and `n_episodes` episodes played on the eval
envs with the trainer's own evaluation seeds for the checkpoint's epoch. So
the default call (n_episodes = the run's n_eval_episodes, temperature 0)
reproduces the run's last logged greedy eval_return exactly. It prints the
mean, std, min and max return. Nothing is written into the run folder: no
lock, no metrics, no checkpoint clean-up.

It uses the same persistent compilation cache as rl.run (rl/compilation_cache.py;
--compilation_cache_dir is rl.run's flag), so it compiles little when a run of
the same config compiled before.

--video records the first episode through gymnasium's rgb_array rendering
into an mp4 file (the returns stay the same). It needs the video extra,
`pip install '.[video]'` (moviepy, and pygame for the classic-control envs).
On a machine without a display, MuJoCo envs render through EGL or OSMesa
(rl.envs.mujoco_rendering picks MUJOCO_GL when it is unset).

Ctrl-C and SIGTERM stop it with one line (exit 130 and 143; rl.termination).
"""
import importlib.util
import os
import sys

from absl import app
from absl import flags
from absl import logging as absl_logging
import numpy as np

from rl import agent
from rl import compilation_cache
from rl import cpu_client
from rl import run as run_lib  # the flags --output_dir and --compilation_cache_dir
from rl import termination
from rl.envs import mujoco_rendering
from rl.envs.video import VIDEO_INSTALL_HINT
from rl.errors import ConfigError
from rl.errors import UserError

FLAGS = flags.FLAGS


def define_flags(flag_values):
  """Defines rl.evaluate's own flags on `flag_values`, which holds rl.run's (rl.run.define_flags).

  --output_dir and --compilation_cache_dir are rl.run's flags: absl refuses a
  second definition of the same name in one process, and their meaning is the
  same. They are listed by --help with rl.evaluate's own.
  """
  define = dict(flag_values=flag_values)
  flags.declare_key_flag('output_dir', **define)
  flags.declare_key_flag('compilation_cache_dir', **define)
  # Here the folder is required and holds the run to evaluate, so its help says so.
  flag_values['output_dir'].help = ('The run folder to evaluate (required): its config.gin and '
                                    'checkpoints.')
  flags.DEFINE_integer('n_episodes', None, 'Episodes to play (default: the run\'s '
                       'n_eval_episodes).', **define)
  flags.DEFINE_float('temperature', 0.0, 'Sampling temperature; 0 is greedy.', **define)
  flags.DEFINE_string('video', None, 'Record the first episode to this .mp4 file (needs '
                      "pip install '.[video]').", **define)


define_flags(FLAGS)


def evaluate_run(output_dir, n_episodes=None, temperature=0.0, video_path=None):
  """Plays the latest checkpoint of the run in `output_dir`.

  Args:
    output_dir: the run folder (holding config.gin and checkpoints/).
    n_episodes: episodes to play (None: the run's n_eval_episodes).
    temperature: sampling temperature; 0 is greedy.
    video_path: an .mp4 file to record the first episode into (missing
      folders are created, an existing file replaced); None: no video.

  Returns:
    {'mean', 'std', 'min', 'max', 'returns', 'epoch', 'video'}: std is the
    population std (ddof=0), 'returns' one float per episode, 'epoch' the
    checkpoint's, 'video' the video's path or None.

  Raises:
    OutputDirError: no run folder, config or checkpoint.
    ConfigError: the saved config or checkpoint cannot be used, or the video
      cannot be recorded (bad path, missing package, env without rgb_array).
  """
  if video_path is not None:
    # Checked before the checkpoint is loaded and the episodes are played.
    if not video_path.lower().endswith('.mp4') or os.path.isdir(video_path):
      raise ConfigError(f"--video={video_path} must name an .mp4 file, e.g. --video=ppo.mp4.")
    if importlib.util.find_spec('moviepy') is None:
      raise ConfigError(f'--video needs moviepy, which is not installed: {VIDEO_INSTALL_HINT}.')
  config_path, checkpoint = agent.read_checkpoint(output_dir)
  if n_episodes is not None and n_episodes < 1:
    raise ConfigError(f'--n_episodes must be >= 1, got {n_episodes}.')
  if temperature < 0:
    raise ConfigError(f'--temperature must be >= 0, got {temperature}.')
  trainer = agent.rebuild(output_dir, config_path, checkpoint)
  try:
    n_episodes = n_episodes or trainer.options.n_eval_episodes
    if n_episodes < 1:
      raise ConfigError(f"the run in '{output_dir}' has n_eval_episodes = 0; pass "
                        '--n_episodes.')
    returns = trainer.episode_returns(float(temperature), n_episodes=n_episodes,
                                      video_path=video_path).tolist()
  finally:
    trainer.close()
  return {'mean': float(np.mean(returns)), 'std': float(np.std(returns)),
          'min': float(np.min(returns)), 'max': float(np.max(returns)), 'returns': returns,
          'epoch': trainer.epoch, 'video': video_path}


def main(argv):
  # orbax warns through absl that a read-only manager cannot save: noise here.
  # (A skipped unreadable checkpoint is still reported: rl.data.checkpoints warns
  # through the root logger, which this does not silence.)
  absl_logging.set_verbosity(absl_logging.ERROR)
  if len(argv) > 1:
    print(f'rl.evaluate: unexpected arguments {argv[1:]}.', file=sys.stderr)
    sys.exit(2)
  if not FLAGS.output_dir:
    print('rl.evaluate: error: give --output_dir, the run folder to evaluate.', file=sys.stderr)
    sys.exit(2)
  if FLAGS.video:
    # Rendering to arrays needs no display nor sound, but pygame's init probes
    # both and, on a headless machine, prints a spurious SDL error line and a
    # dozen ALSA lines.
    os.environ.setdefault('SDL_VIDEODRIVER', 'dummy')
    os.environ.setdefault('SDL_AUDIODRIVER', 'dummy')
    # Before mujoco is imported (by the first MuJoCo env made): it reads MUJOCO_GL then.
    mujoco_rendering.choose_gl()
  compilation_cache.configure(FLAGS.compilation_cache_dir, 'rl.evaluate')
  # Evaluation on host envs calls the policy once a step and reads it at once;
  # on JAX-native envs it is one compiled loop either way (rl.cpu_client).
  cpu_client.choose_dispatch(inline=True)
  termination.stop_on_sigterm()
  try:
    result = evaluate_run(FLAGS.output_dir, FLAGS.n_episodes, FLAGS.temperature,
                          video_path=FLAGS.video or None)
  except UserError as e:
    print(f'rl.evaluate: error: {e}', file=sys.stderr)
    sys.exit(2)
  except KeyboardInterrupt:
    # Nothing was written into the run folder; a partial video is removed
    # with its temporary folder (rl.envs.gym_task).
    print(f'rl.evaluate: {termination.cause()}interrupted; the run folder is unchanged: rerun '
          'the same command to evaluate it.', file=sys.stderr)
    sys.exit(termination.exit_status())
  print(f"{FLAGS.output_dir} epoch {result['epoch']}: {len(result['returns'])} episodes at "
        f"temperature {FLAGS.temperature:g}: return mean {result['mean']:.2f} "
        f"std {result['std']:.2f} min {result['min']:.2f} max {result['max']:.2f}")
  if result['video']:
    # Counted in the written file, not assumed from the episode length:
    # moviepy drops the last frame of some sequences (float rounding of n / fps).
    # imageio_ffmpeg comes with moviepy, which --video required.
    import imageio_ffmpeg  # pylint: disable=import-outside-toplevel
    n_frames, _ = imageio_ffmpeg.count_frames_and_secs(result['video'])
    print(f"video of episode 1 (return {result['returns'][0]:.2f}, {n_frames} frames) "
          f"written to {result['video']}")


if __name__ == '__main__':
  app.run(main, flags_parser=run_lib.flags_parser('rl.evaluate'))
