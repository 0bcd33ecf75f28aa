"""Runs cut short resume where they stopped: SIGKILL, Ctrl-C, a NaN, a corrupt checkpoint.

A run killed with SIGKILL midway (REINFORCE, DQN with a held target network,
a Transformer PPO) resumes bit for bit the same as a run never stopped; Ctrl-C
exits 130 with one line naming the epoch and the last checkpoint, and a rerun
resumes; a loss or weights gone non-finite stop the run with one line and
keep the last good checkpoint; an unreadable newest checkpoint falls back to
the one before. Each interrupted run is held at tests/sweep_gate.py's gate
past a checkpoint when signalled, so the signal always finds it there.
"""
import os
import signal
import subprocess
import sys

import jax
import numpy as np
import pytest

from rl import experiment
from rl.data.checkpoints import Checkpointer
from rl.errors import NonFiniteLossError
from rl.metrics import read_metrics
import run_helpers
from run_helpers import REINFORCE
from run_helpers import ROOT
from run_helpers import TINY
from run_helpers import assert_one_line_error
from run_helpers import cli
from run_helpers import final_params
from run_helpers import gated_config
from run_helpers import wait_for_checkpoint
from run_helpers import without_timing


DQN_CARTPOLE = os.path.join(ROOT, 'configs', 'dqn_cartpole.gin')
PPO_TRANSFORMER = os.path.join(ROOT, 'configs', 'ppo_cartpole_transformer.gin')

# Each run: 10 epochs, checkpoints every 4, killed inside epoch 5.
SIGKILL_RUNS = {
    'reinforce': [REINFORCE, 'RLTask.n_envs = 4',
                  'PolicyGradientTrainer.n_trajectories_per_epoch = 6',
                  'PolicyGradientTrainer.batch_size = 128',
                  'PolicyGradientTrainer.n_eval_episodes = 2'],
    # The held target (target_sync 'global'): 3 gradient steps an epoch and
    # sync_freq 5, so at the epoch-4 checkpoint (step 12) the target is
    # step 10's network, which the resumed run must continue from.
    'dqn_held_target': [DQN_CARTPOLE, 'RLTask.n_envs = 2', 'RLTask.initial_trajectories = 2',
                        'MLP.layer_widths = (8,)', "DQN.target_sync = 'global'",
                        'DQN.n_interactions_per_epoch = 16', 'DQN.value_train_steps_per_epoch = 3',
                        'DQN.value_batch_size = 8', 'DQN.sync_freq = 5',
                        'DQN.n_eval_episodes = 2', 'DQN.eval_every = 1'],
    # A Transformer policy: the episode windows are part of the saved envs, so
    # the resumed run continues each running episode's window exactly (one layer
    # carries the windows as two do, and compiles in about half the time).
    'ppo_transformer': [PPO_TRANSFORMER, 'RLTask.n_envs = 2', 'RLTask.context_length = 4',
                        'PPO.n_interactions_per_epoch = 32', 'PPO.policy_batch_size = 8',
                        'PPO.value_batch_size = 8', 'PPO.policy_train_steps_per_epoch = 2',
                        'PPO.value_train_steps_per_epoch = 2', 'PPO.n_eval_episodes = 1',
                        'PPO.eval_every = 2', 'TransformerDecoder.d_model = 8',
                        'TransformerDecoder.d_ff = 8', 'TransformerDecoder.n_heads = 2',
                        'TransformerDecoder.n_layers = 1'],
}


def latest_arrays(folder):
  return Checkpointer(os.path.join(folder, 'checkpoints')).restore_latest()[:2]


def trees_equal(a, b):
  leaves_a, tree_a = jax.tree_util.tree_flatten(a)
  leaves_b, tree_b = jax.tree_util.tree_flatten(b)
  return tree_a == tree_b and all(np.array_equal(x, y) for x, y in zip(leaves_a, leaves_b))


@pytest.mark.parametrize('run', sorted(SIGKILL_RUNS))
def test_sigkill_mid_run_then_resume_is_bit_exact(tmp_path, run):
  gate, gated = gated_config(tmp_path)
  config, *bindings = SIGKILL_RUNS[run]
  flags = [f'--config_file={config}', f'--config_file={gated}',
           '--config=train_rl.n_epochs = 10', '--config=train_rl.checkpoint_every = 4',
           *[f'--config={b}' for b in bindings]]
  killed = tmp_path / 'killed'
  proc = subprocess.Popen([sys.executable, '-m', 'rl.run', *flags, f'--output_dir={killed}'],
                          cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
  # Held at the gate inside epoch 5, past the epoch-4 checkpoint.
  wait_for_checkpoint(proc, killed, 4, gate)
  proc.send_signal(signal.SIGKILL)
  proc.wait()
  assert [r['epoch'] for r in read_metrics(killed)] == [1, 2, 3, 4]
  if run == 'dqn_held_target':
    step, arrays = latest_arrays(killed)
    assert step == 4 and int(arrays['trainers']['value']['step']) == 12
    assert not trees_equal(arrays['extra']['target']['params'],
                           arrays['trainers']['value']['params'])
  gate.write_text('')
  resumed = cli(*flags, f'--output_dir={killed}')
  assert resumed.returncode == 0, resumed.stderr
  assert 'Resuming' in resumed.stdout
  straight = str(tmp_path / 'straight')
  assert cli(*flags, f'--output_dir={straight}').returncode == 0

  assert without_timing(read_metrics(killed)) == without_timing(read_metrics(straight))
  step_a, arrays_a = latest_arrays(straight)
  step_b, arrays_b = latest_arrays(killed)
  assert step_a == step_b == 10
  # The networks, their optimizers and the algorithm's extra state (DQN's target).
  assert jax.tree_util.tree_leaves(arrays_a['trainers'])
  assert trees_equal(arrays_a['trainers'], arrays_b['trainers'])
  assert trees_equal(arrays_a['extra'], arrays_b['extra'])


def test_ctrl_c_says_where_the_run_stopped_and_rerun_resumes(tmp_path):
  """SIGINT: the epoch under way finishes and is checkpointed, one line names it, exit 130,
  then a resume from it.

  The run waits at gated_config's gate after its first checkpoint, so the
  signal always finds it inside epoch 2 with checkpoint 1 written; asked to
  stop, the gate lets it finish epoch 2 (tests/sweep_gate.py).
  """
  gate, gated = gated_config(tmp_path)
  out = tmp_path / 'run'
  args = [f'--config_file={REINFORCE}', f'--config_file={gated}', f'--output_dir={out}',
          *[f'--config={b}' for b in TINY]]
  proc = subprocess.Popen([sys.executable, '-m', 'rl.run', *args], cwd=ROOT,
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                          preexec_fn=run_helpers.default_sigint)
  wait_for_checkpoint(proc, out, 1, gate)
  proc.send_signal(signal.SIGINT)
  stdout, stderr = proc.communicate(timeout=120)
  assert proc.returncode == 130, stderr
  assert ('rl.run: Ctrl-C: stopping after the epoch under way, once its checkpoint is written; '
          'Ctrl-C again stops at once, from the last checkpoint.') in stdout
  lines = stderr.strip().splitlines()
  assert len(lines) == 1, stderr
  assert lines[0] == (f'rl.run: stopped after epoch 2/3, checkpointed ({out}/checkpoints/2): '
                      'rerun the same command to resume from it.')
  assert [r['epoch'] for r in read_metrics(out)] == [1, 2]

  gate.write_text('')
  resumed = cli(*args)
  assert resumed.returncode == 0, resumed.stderr
  assert f'Resuming {out} from epoch 2/3: ' in resumed.stdout
  assert [r['epoch'] for r in read_metrics(out)] == [1, 2, 3]


def test_nan_loss_stops_keeping_the_last_good_checkpoint(tmp_path):
  out = str(tmp_path / 'nan')
  experiment.execute([REINFORCE], TINY[:1] + ['train_rl.n_epochs = 2'] + TINY[2:], out)
  good = final_params(out)
  metrics_before = read_metrics(out)
  # The losses of epoch 3's steps are finite (each is taken before its
  # update); the weights its first update makes are not, and that stops it there.
  with pytest.raises(NonFiniteLossError,
                     match="'global norm of the weights trained on policy_loss' became inf "
                           "at train step 3;"):
    experiment.execute([REINFORCE], TINY + ['train_rl.n_epochs = 4', 'multifactor.constant = 1e38'],
                    out, allow_config_change=True)
  step, params = final_params(out)
  assert step == good[0] == 2
  np.testing.assert_array_equal(params['policy_head']['kernel'], good[1]['policy_head']['kernel'])
  assert read_metrics(out)[:2] == metrics_before


def test_cli_nan_exit_code_and_message(tmp_path):
  """A NaN in the first epoch: no checkpoint to keep yet, and clipping is off."""
  out = tmp_path / 'n'
  result = cli(f'--config_file={REINFORCE}', f'--output_dir={out}',
               *[f'--config={b}' for b in TINY], '--config=multifactor.constant = 1e38',
               '--config=Adam.clip_grad_norm = None')
  assert_one_line_error(result, "' became inf at train step 1;", 'no checkpoint was written',
                        'Adam.clip_grad_norm = 0.5')
  assert 'last good checkpoint' not in result.stderr
  assert result.returncode == 1
  assert not os.path.exists(out / 'checkpoints') or not os.listdir(out / 'checkpoints')


def test_cli_nan_after_a_checkpoint_with_clipping_on(tmp_path):
  """The message names the kept checkpoint and does not suggest the clipping already set."""
  out = tmp_path / 'n'
  experiment.execute([REINFORCE], TINY[:1] + ['train_rl.n_epochs = 1'] + TINY[2:], str(out))
  result = cli(f'--config_file={REINFORCE}', f'--output_dir={out}', '--allow_config_change',
               *[f'--config={b}' for b in TINY], '--config=multifactor.constant = 1e38')
  # The REINFORCE config sets Adam.clip_grad_norm = 1.0.
  assert_one_line_error(result, "' became inf at train step 2;",
                        'the last good checkpoint (epoch 1) is kept',
                        'gradient clipping is already on (Adam.clip_grad_norm = 1.0)')
  assert 'clip_grad_norm = 0.5' not in result.stderr
  assert result.returncode == 1


def test_corrupt_newest_checkpoint_falls_back_to_the_previous(tmp_path, caplog):
  out = str(tmp_path / 'corrupt')
  experiment.execute([REINFORCE], TINY, out)  # checkpoints after epochs 1, 2 and 3
  checkpoints = os.path.join(out, 'checkpoints')
  # Damage every array file of the newest checkpoint.
  damaged = 0
  for dirpath, _, files in os.walk(os.path.join(checkpoints, '3', 'npz')):
    for name in files:
      with open(os.path.join(dirpath, name), 'wb') as f:
        f.write(b'garbage')
      damaged += 1
  assert damaged
  with caplog.at_level('WARNING'):
    trainer = experiment.execute([REINFORCE], TINY, out)
  assert 'checkpoint 3 is unreadable' in caplog.text
  assert trainer.epoch == 3  # epoch 3 was redone from the epoch-2 checkpoint
  straight = experiment.execute([REINFORCE], TINY, str(tmp_path / 'straight'))
  assert without_timing(read_metrics(out)) == without_timing(straight.history)
