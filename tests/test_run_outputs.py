"""What a finished run leaves and says: its folder, metrics, console lines and stopping.

A tiny REINFORCE run end to end: the files of its folder (operative config,
metrics, log, checkpoints, TensorBoard), one console line per epoch and the
closing line, the same numbers for the same seed and others for another, the
keys of extra eval temperatures, `train_rl.stop_at_return` stopping early (and
a rerun that then does nothing), and `--output_dir`'s default,
runs/<config stem> under the working directory.
"""
import os

from rl import experiment
from rl.metrics import read_metrics
from run_helpers import REINFORCE
from run_helpers import TINY
from run_helpers import cli
from run_helpers import without_timing


def test_outputs_of_a_run(finished_run):
  names = set(os.listdir(finished_run))
  assert {'config.gin', 'metrics.jsonl', 'log.txt', 'checkpoints', 'tensorboard'} <= names
  assert os.listdir(os.path.join(finished_run, 'tensorboard'))
  records = read_metrics(finished_run)
  assert [r['epoch'] for r in records] == [1, 2, 3]
  for key in ('env_steps', 'n_trajectories', 'train_return', 'eval_return', 'policy_loss',
              'time_collect', 'time_eval', 'time_train'):
    assert key in records[-1]
  # Only the first epoch a process runs compiles; its seconds are logged apart.
  assert records[0]['time_compile'] > 0
  assert 'time_compile' not in records[1] and 'time_compile' not in records[2]
  assert records[0]['env_steps'] < records[1]['env_steps'] < records[2]['env_steps']
  with open(os.path.join(finished_run, 'config.gin')) as f:
    operative = f.read()
  assert 'PolicyGradientTrainer.batch_size = 64' in operative
  assert 'RLTask.env' in operative


def test_console_shows_one_line_per_epoch(tmp_path):
  result = cli(f'--config_file={REINFORCE}', f'--output_dir={tmp_path / "c"}',
               *[f'--config={b}' for b in TINY], '--verbose')
  assert result.returncode == 0, result.stderr
  lines = [l for l in result.stdout.splitlines() if l.startswith('epoch ') and ' | ' in l]
  assert len(lines) == 3
  assert lines[-1].startswith('epoch 3/3 | env steps ')
  assert 'eval' in lines[-1] and 'steps/s' in lines[-1] and 'left' in lines[-1]
  # The first epoch compiles: its time says nothing about the epochs left.
  assert 'compiling' in lines[0] and 'left' not in lines[0]
  # The closing line rounds the eval return as the epoch lines do.
  eval_return = read_metrics(tmp_path / 'c')[-1]['eval_return']
  assert f'eval return {eval_return:.1f}.' in result.stdout.splitlines()[-5]
  # The log file ends with the console's last line.
  with open(tmp_path / 'c' / 'log.txt') as f:
    assert f.read().splitlines()[-1].endswith(result.stdout.splitlines()[-1])


def test_same_seed_same_numbers_and_seed_flag_changes_them(tmp_path):
  a = experiment.execute([REINFORCE], TINY, str(tmp_path / 'a'))
  b = experiment.execute([REINFORCE], TINY, str(tmp_path / 'b'))
  c = experiment.execute([REINFORCE], TINY, str(tmp_path / 'c'), seed=5)
  assert without_timing(a.history) == without_timing(b.history)
  assert without_timing(a.history) != without_timing(c.history)


def test_eval_temperatures_are_logged_under_their_keys(tmp_path):
  trainer = experiment.execute([REINFORCE], TINY + ['train_rl.n_epochs = 1',
                                                 'PolicyGradientTrainer.eval_temperatures = (0, 0.5)'],
                            str(tmp_path / 't'))
  assert {'eval_return', 'eval_return_temperature_0.5'} <= set(trainer.history[-1])


def test_stop_at_return_stops_early_and_a_rerun_does_nothing(tmp_path):
  out = str(tmp_path / 'stop')
  bindings = TINY + ['train_rl.n_epochs = 5', 'train_rl.stop_at_return = 1']
  trainer = experiment.execute([REINFORCE], bindings, out)
  assert trainer.epoch == 1  # any CartPole eval return is >= 1
  assert experiment.execute([REINFORCE], bindings, out).epoch == 1
  # Dropping the goal continues the same run to n_epochs (the binding may change).
  assert experiment.execute([REINFORCE], TINY + ['train_rl.n_epochs = 2'], out).epoch == 2


def test_default_relative_output_dir(tmp_path, monkeypatch):
  """`--output_dir` defaults to runs/<config stem>, relative to the working directory."""
  monkeypatch.chdir(tmp_path)
  bindings = TINY + ['train_rl.n_epochs = 2', 'train_rl.checkpoint_every = 2']
  experiment.execute([REINFORCE], bindings)
  assert [r['epoch'] for r in read_metrics('runs/reinforce_cartpole')] == [1, 2]
  assert os.listdir(os.path.join('runs', 'reinforce_cartpole', 'checkpoints'))
  assert experiment.execute([REINFORCE], bindings).epoch == 2  # resumes from there
