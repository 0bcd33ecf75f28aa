"""The runner end to end: outputs, resume, bad input (one line, non-zero, folder intact)."""
import json
import os
import signal
import subprocess
import sys
import time

import jax
import numpy as np
import pytest

from rl import run as run_lib
from rl.checkpoints import Checkpointer
from rl.errors import ConfigError
from rl.errors import NonFiniteLossError
from rl.errors import OutputDirError
from rl.metrics import TIMING_KEYS
from rl.metrics import read_metrics
import run_helpers
from run_helpers import REINFORCE
from run_helpers import ROOT
from run_helpers import TINY

def snapshot(folder):
  return run_helpers.snapshot(folder, ignore=('.lock',))


def cli(*args, timeout=240):
  return subprocess.run([sys.executable, '-m', 'rl.run', *args], cwd=ROOT,
                        capture_output=True, text=True, timeout=timeout)


def test_outputs_of_a_run(finished_run):
  names = set(os.listdir(finished_run))
  assert {'config.gin', 'metrics.jsonl', 'log.txt', 'checkpoints', 'tensorboard'} <= names
  assert os.listdir(os.path.join(finished_run, 'tensorboard'))
  records = read_metrics(finished_run)
  assert [r['epoch'] for r in records] == [1, 2, 3]
  for key in ('env_steps', 'n_trajectories', 'train_return', 'eval_return', 'policy_loss',
              'time_collect', 'time_eval', 'time_train'):
    assert key in records[-1]
  assert records[0]['env_steps'] < records[1]['env_steps'] < records[2]['env_steps']
  with open(os.path.join(finished_run, 'config.gin')) as f:
    operative = f.read()
  assert 'PolicyGradientTrainer.batch_size = 64' in operative
  assert 'RLTask.env' in operative


def test_rerun_of_a_finished_run_changes_nothing_and_extending_continues(finished_run):
  before = read_metrics(finished_run)
  run_lib.execute([REINFORCE], TINY, finished_run)
  assert read_metrics(finished_run) == before
  trainer = run_lib.execute([REINFORCE], TINY + ['train_rl.n_epochs = 4'], finished_run)
  assert trainer.epoch == 4
  assert [r['epoch'] for r in read_metrics(finished_run)] == [1, 2, 3, 4]


def test_console_shows_one_line_per_epoch(tmp_path):
  result = cli(f'--config_file={REINFORCE}', f'--output_dir={tmp_path / "c"}',
               *[f'--config={b}' for b in TINY])
  assert result.returncode == 0, result.stderr
  lines = [l for l in result.stdout.splitlines() if l.startswith('epoch ')]
  assert len(lines) == 3
  assert lines[-1].startswith('epoch 3/3 | env steps ')
  assert 'eval' in lines[-1] and 'steps/s' in lines[-1] and 'left' in lines[-1]


def final_params(folder):
  step, arrays, _ = Checkpointer(os.path.join(folder, 'checkpoints')).restore_latest()
  return step, arrays['trainers']['policy']['params']


def without_timing(records):
  return [{k: v for k, v in r.items() if k not in TIMING_KEYS} for r in records]


def test_sigkill_mid_run_then_resume_is_bit_exact(tmp_path):
  flags = [f'--config_file={REINFORCE}', '--config=train_rl.n_epochs = 14',
           '--config=train_rl.checkpoint_every = 4', '--config=RLTask.n_envs = 4',
           '--config=PolicyGradientTrainer.n_trajectories_per_epoch = 6',
           '--config=PolicyGradientTrainer.batch_size = 128',
           '--config=PolicyGradientTrainer.n_eval_episodes = 2']
  straight = str(tmp_path / 'straight')
  assert cli(*flags, f'--output_dir={straight}').returncode == 0

  killed = str(tmp_path / 'killed')
  proc = subprocess.Popen([sys.executable, '-m', 'rl.run', *flags, f'--output_dir={killed}'],
                          cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
  metrics_path = os.path.join(killed, 'metrics.jsonl')
  deadline = time.time() + 180
  # Kill after epoch 9 is logged: past the epoch-8 checkpoint, inside epoch 10.
  while time.time() < deadline and proc.poll() is None:
    if os.path.exists(metrics_path):
      with open(metrics_path) as f:
        if sum(1 for _ in f) >= 9:
          break
    time.sleep(0.005)
  assert proc.poll() is None, 'the run ended before it could be killed'
  proc.send_signal(signal.SIGKILL)
  proc.wait()
  assert len(read_metrics(killed)) < 14
  resumed = cli(*flags, f'--output_dir={killed}')
  assert resumed.returncode == 0, resumed.stderr
  assert 'Resuming' in resumed.stdout

  assert without_timing(read_metrics(killed)) == without_timing(read_metrics(straight))
  step_a, params_a = final_params(straight)
  step_b, params_b = final_params(killed)
  assert step_a == step_b == 14
  leaves_a, tree_a = jax.tree_util.tree_flatten(params_a)
  leaves_b, tree_b = jax.tree_util.tree_flatten(params_b)
  assert tree_a == tree_b
  for a, b in zip(leaves_a, leaves_b):
    np.testing.assert_array_equal(a, b)


def test_same_seed_same_numbers_and_seed_flag_changes_them(tmp_path):
  a = run_lib.execute([REINFORCE], TINY, str(tmp_path / 'a'))
  b = run_lib.execute([REINFORCE], TINY, str(tmp_path / 'b'))
  c = run_lib.execute([REINFORCE], TINY, str(tmp_path / 'c'), seed=5)
  assert without_timing(a.history) == without_timing(b.history)
  assert without_timing(a.history) != without_timing(c.history)


# -- bad input ------------------------------------------------------------------


def assert_one_line_error(result, *needles):
  assert result.returncode != 0
  err = result.stderr.strip().splitlines()
  assert len(err) == 1, result.stderr
  for needle in needles:
    assert needle in err[0], err[0]


def test_cli_unknown_configurable_suggests_the_closest(tmp_path):
  out = tmp_path / 'x'
  result = cli(f'--config_file={REINFORCE}', '--config=RLTaks.gamma = 0.9', f'--output_dir={out}')
  assert_one_line_error(result, "'RLTaks'", "Did you mean 'RLTask'")
  assert not out.exists()


def test_cli_missing_config_file(tmp_path):
  result = cli('--config_file=configs/nope.gin', f'--output_dir={tmp_path / "x"}')
  assert_one_line_error(result, 'configs/nope.gin', 'does not exist')


@pytest.mark.parametrize('binding, needles', [
    ('RLTask.gama = 0.9', ["'RLTask' has no parameter 'gama'", "Did you mean 'gamma'"]),
    ('PolicyGradientTrainer.n_eval_episdoes = 3', ["Did you mean 'n_eval_episodes'"]),
    ("RLTask.n_envs = 'many'", ['cannot build RLTask']),
    ("RLTask.env = 'CartPol-v1'", ["unknown env id 'CartPol-v1'", "Did you mean 'CartPole-v1'"]),
    ("RLTask.env = 'rl_test/TupleAction-v0'", ['PolicyGradientTrainer cannot act',
                                               'not supported']),
    ('PolicyGradientTrainer.n_interactions_per_epoch = 100',
     ['exactly one of n_trajectories_per_epoch']),
    ("multifactor.factors = 'constant * warmupp'", ["warmupp"]),
    # Integer parameters refuse floats and bools instead of truncating them.
    ('train_rl.n_epochs = 2.5', ['train_rl.n_epochs must be an integer, got 2.5',
                                 'train_rl.n_epochs = 2']),
    ('RLTask.n_envs = True', ['RLTask.n_envs must be an integer, got True (a bool)']),
    ('RLTask.seed = 1.5', ['RLTask.seed must be an integer']),
    ('RLTask.max_steps = 100.0', ['RLTask.max_steps must be an integer']),
    ('PolicyGradientTrainer.batch_size = 64.0', ['PolicyGradientTrainer.batch_size must be']),
    ('PolicyGradientTrainer.n_trajectories_per_epoch = 4.5',
     ['PolicyGradientTrainer.n_trajectories_per_epoch must be an integer']),
    ('policy/multifactor.warmup_steps = 1e3', ['policy/multifactor.warmup_steps must be',
                                               'warmup_steps = 1000']),
])
def test_bad_config_is_one_clear_line_and_writes_nothing(tmp_path, binding, needles):
  out = tmp_path / 'x'
  with pytest.raises(ConfigError) as info:
    run_lib.execute([REINFORCE], TINY + [binding], str(out))
  message = str(info.value)
  assert '\n' not in message
  for needle in needles:
    assert needle in message
  assert not out.exists()


@pytest.mark.parametrize('error', [ValueError, KeyError, AttributeError, IndexError])
def test_a_bug_while_building_is_not_reported_as_a_config_error(error):
  """Only errors that come from the config become one-line ConfigErrors.

  A KeyError or ValueError raised by the code itself is a bug; reporting it as
  a bad gin binding would send the user looking in the wrong place.
  """
  class Broken:
    def __init__(self):
      raise error('a bug in the code, not in the config')

  with pytest.raises(error):
    run_lib.construct(Broken)


def test_output_dir_that_is_a_file(tmp_path):
  path = tmp_path / 'file'
  path.write_text('keep me')
  with pytest.raises(OutputDirError, match='is a file'):
    run_lib.execute([REINFORCE], TINY, str(path))
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
    run_lib.execute([REINFORCE], TINY, target)


def test_changed_config_is_refused_with_the_differing_binding(finished_run):
  before = snapshot(finished_run)
  with pytest.raises(OutputDirError, match=r'RLTask.gamma: 0.99 -> 0.9'):
    run_lib.execute([REINFORCE], TINY + ['RLTask.gamma = 0.9'], finished_run)
  assert snapshot(finished_run) == before


def test_n_epochs_below_finished_epochs(finished_run):
  before = snapshot(finished_run)
  done = len(read_metrics(finished_run))
  with pytest.raises(ConfigError, match=f'lower than the {done} epochs'):
    run_lib.execute([REINFORCE], TINY + ['train_rl.n_epochs = 1'], finished_run)
  assert snapshot(finished_run) == before


def test_second_run_on_a_busy_folder_is_refused(tmp_path):
  out = tmp_path / 'busy'
  out.mkdir()
  with run_lib.folder_lock(str(out)):
    with pytest.raises(OutputDirError, match='in use by a running run'):
      run_lib.execute([REINFORCE], TINY, str(out))


def test_nan_loss_stops_keeping_the_last_good_checkpoint(tmp_path):
  out = str(tmp_path / 'nan')
  run_lib.execute([REINFORCE], TINY[:1] + ['train_rl.n_epochs = 2'] + TINY[2:], out)
  good = final_params(out)
  metrics_before = read_metrics(out)
  with pytest.raises(NonFiniteLossError, match="'policy_[a-z]+' became nan"):
    run_lib.execute([REINFORCE], TINY + ['train_rl.n_epochs = 4', 'multifactor.constant = 1e38'],
                    out, allow_config_change=True)
  step, params = final_params(out)
  assert step == good[0] == 2
  np.testing.assert_array_equal(params['policy_head']['kernel'], good[1]['policy_head']['kernel'])
  assert read_metrics(out)[:2] == metrics_before


def test_cli_nan_exit_code_and_message(tmp_path):
  result = cli(f'--config_file={REINFORCE}', f'--output_dir={tmp_path / "n"}',
               *[f'--config={b}' for b in TINY], '--config=multifactor.constant = 1e38',
               '--config=Adam.clip_grad_norm = None')
  assert_one_line_error(result, "' became nan at train step", 'last good checkpoint')
  assert result.returncode == 1


def test_corrupt_newest_checkpoint_falls_back_to_the_previous(tmp_path, caplog):
  out = str(tmp_path / 'corrupt')
  run_lib.execute([REINFORCE], TINY, out)  # checkpoints after epochs 1, 2 and 3
  checkpoints = os.path.join(out, 'checkpoints')
  # Damage every array file of the newest checkpoint.
  for dirpath, _, files in os.walk(os.path.join(checkpoints, '3', 'arrays')):
    for name in files:
      with open(os.path.join(dirpath, name), 'wb') as f:
        f.write(b'garbage')
  with caplog.at_level('WARNING'):
    trainer = run_lib.execute([REINFORCE], TINY, out)
  assert 'checkpoint 3 is unreadable' in caplog.text
  assert trainer.epoch == 3  # epoch 3 was redone from the epoch-2 checkpoint
  straight = run_lib.execute([REINFORCE], TINY, str(tmp_path / 'straight'))
  assert without_timing(read_metrics(out)) == without_timing(straight.history)


def test_eval_temperatures_are_logged_under_their_keys(tmp_path):
  trainer = run_lib.execute([REINFORCE], TINY + ['train_rl.n_epochs = 1',
                                                 'PolicyGradientTrainer.eval_temperatures = (0, 0.5)'],
                            str(tmp_path / 't'))
  assert {'eval_return', 'eval_return_temperature_0.5'} <= set(trainer.history[-1])


def test_stop_at_return_stops_early_and_a_rerun_does_nothing(tmp_path):
  out = str(tmp_path / 'stop')
  bindings = TINY + ['train_rl.n_epochs = 5', 'train_rl.stop_at_return = 1']
  trainer = run_lib.execute([REINFORCE], bindings, out)
  assert trainer.epoch == 1  # any CartPole eval return is >= 1
  assert run_lib.execute([REINFORCE], bindings, out).epoch == 1
  # Dropping the goal continues the same run to n_epochs (the binding may change).
  assert run_lib.execute([REINFORCE], TINY + ['train_rl.n_epochs = 2'], out).epoch == 2


def test_default_relative_output_dir(tmp_path, monkeypatch):
  """`--output_dir` defaults to runs/<config stem>, relative to the working directory."""
  monkeypatch.chdir(tmp_path)
  bindings = TINY + ['train_rl.n_epochs = 2', 'train_rl.checkpoint_every = 2']
  run_lib.execute([REINFORCE], bindings)
  assert [r['epoch'] for r in read_metrics('runs/reinforce_cartpole')] == [1, 2]
  assert os.listdir(os.path.join('runs', 'reinforce_cartpole', 'checkpoints'))
  assert run_lib.execute([REINFORCE], bindings).epoch == 2  # resumes from there
