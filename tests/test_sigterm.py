"""SIGTERM (from `kill`, Slurm, Kubernetes) stops rl.run, rl.evaluate, launch.sweep as Ctrl-C.

Each process is held at tests/sweep_gate.py's gate, past a checkpoint, when
the signal is sent, so the signal always finds it in the same place.
"""
import os
import signal
import subprocess
import sys
import time

import jax
import numpy as np

from rl.metrics import read_metrics
from run_helpers import REINFORCE
from run_helpers import ROOT
from run_helpers import TINY
from run_helpers import TINY_WITHOUT_ENVS
from run_helpers import cli
from run_helpers import cli_process
from run_helpers import default_sigint
from run_helpers import final_params
from run_helpers import gated_config
from run_helpers import snapshot
from run_helpers import wait_for_checkpoint
from run_helpers import without_timing
import sweep_helpers


def one_line(stderr):
  lines = stderr.strip().splitlines()
  assert len(lines) == 1, stderr
  return lines[0]


def assert_no_partial_checkpoint(run_dir):
  names = os.listdir(os.path.join(run_dir, 'checkpoints'))
  assert all(name.isdigit() for name in names), names


def test_sigterm_finishes_the_epoch_checkpoints_it_and_the_resume_is_bit_exact(tmp_path):
  """SIGTERM midway through epoch 3 of 4, checkpointed every 2: the run finishes epoch 3,
  checkpoints it and stops in one line; the rerun resumes from epoch 3 (not from the
  periodic checkpoint 2) and ends as an uninterrupted run, bit for bit."""
  gate, gated = gated_config(tmp_path, after_epochs=2)
  out = tmp_path / 'run'
  bindings = TINY + ['train_rl.n_epochs = 4', 'train_rl.checkpoint_every = 2']
  args = [f'--config_file={REINFORCE}', f'--config_file={gated}',
          *[f'--config={b}' for b in bindings]]
  proc = subprocess.Popen([sys.executable, '-m', 'rl.run', *args, f'--output_dir={out}'],
                          cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
  wait_for_checkpoint(proc, out, 2, gate)
  proc.send_signal(signal.SIGTERM)
  stdout, stderr = proc.communicate(timeout=120)
  assert proc.returncode == 143, stderr
  assert 'rl.run: SIGTERM: stopping after the epoch under way' in stdout
  line = one_line(stderr)
  checkpoint = out / 'checkpoints' / '3'
  assert line == (f'rl.run: SIGTERM: stopped after epoch 3/4, checkpointed ({checkpoint}): '
                  'rerun the same command to resume from it.'), line
  assert_no_partial_checkpoint(out)
  assert sorted(os.listdir(out / 'checkpoints')) == ['2', '3']
  assert [r['epoch'] for r in read_metrics(out)] == [1, 2, 3]

  gate.write_text('')
  resumed = cli(*args, f'--output_dir={out}')
  assert resumed.returncode == 0, resumed.stderr
  assert f'Resuming {out} from epoch 3/' in resumed.stdout
  straight = tmp_path / 'straight'
  assert cli(*args, f'--output_dir={straight}').returncode == 0
  assert without_timing(read_metrics(out)) == without_timing(read_metrics(straight))
  step_a, params_a = final_params(straight)
  step_b, params_b = final_params(out)
  assert step_a == step_b == 4
  leaves_a, tree_a = jax.tree_util.tree_flatten(params_a)
  leaves_b, tree_b = jax.tree_util.tree_flatten(params_b)
  assert tree_a == tree_b
  for a, b in zip(leaves_a, leaves_b):
    np.testing.assert_array_equal(a, b)


def test_a_second_signal_stops_at_once_from_the_last_checkpoint(tmp_path):
  """Ctrl-C asks the run to finish its epoch; a second Ctrl-C while it is still in it (held at
  the gate) stops it at once, from checkpoint 1, in one line."""
  gate, gated = gated_config(tmp_path, hold_when_stopping=True)
  out = tmp_path / 'run'
  proc = subprocess.Popen(
      [sys.executable, '-m', 'rl.run', f'--config_file={REINFORCE}', f'--config_file={gated}',
       *[f'--config={b}' for b in TINY], f'--output_dir={out}'],
      cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
      preexec_fn=default_sigint)
  wait_for_checkpoint(proc, out, 1, gate)
  proc.send_signal(signal.SIGINT)
  wait_for_marker(proc, f'{gate}.stop-asked-{proc.pid}')
  proc.send_signal(signal.SIGINT)
  _, stderr = proc.communicate(timeout=120)
  assert proc.returncode == 130, stderr
  # Epoch 2 was abandoned: the last completed epoch is 1, its checkpoint the last one.
  line = one_line(stderr)
  assert line == (f"rl.run: stopped after epoch 1/3, checkpointed ({out / 'checkpoints' / '1'}): "
                  'rerun the same command to resume from it.'), line
  assert_no_partial_checkpoint(out)
  assert sorted(os.listdir(out / 'checkpoints')) == ['1']
  assert [r['epoch'] for r in read_metrics(out)] == [1]


def test_sigterm_stops_a_seeds_run_in_one_line_and_a_rerun_resumes(tmp_path):
  gate, gated = gated_config(tmp_path)
  out = tmp_path / 'seeds'
  args = [f'--config_file={REINFORCE}', f'--config_file={gated}', f'--output_dir={out}',
          '--seeds=0,1', *[f'--config={b}' for b in TINY]]
  proc = subprocess.Popen([sys.executable, '-m', 'rl.run', *args], cwd=ROOT,
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
  # Gymnasium seeds run one after the other: seed 0 is held in its epoch 2, which it
  # finishes and checkpoints.
  wait_for_checkpoint(proc, out / 'seed_0', 1, gate)
  proc.send_signal(signal.SIGTERM)
  _, stderr = proc.communicate(timeout=120)
  assert proc.returncode == 143, stderr
  line = one_line(stderr)
  assert line.startswith('rl.run: SIGTERM: stopped after epoch 2/3, checkpointed'), line
  assert str(out / 'seed_0' / 'checkpoints' / '2') in line
  assert_no_partial_checkpoint(out / 'seed_0')
  assert not (out / 'seed_1').exists()

  gate.write_text('')
  resumed = cli(*args)
  assert resumed.returncode == 0, resumed.stderr
  assert f"Resuming {out / 'seed_0'} from epoch 2/" in resumed.stdout
  for seed in (0, 1):
    assert [r['epoch'] for r in read_metrics(out / f'seed_{seed}')] == [1, 2, 3]


def wait_for_marker(proc, marker):
  """Waits until `proc` is held at the gate, where it leaves `marker` (tests/sweep_gate.py)."""
  deadline = time.monotonic() + 180
  while not os.path.exists(marker):
    assert proc.poll() is None, proc.communicate()
    assert time.monotonic() < deadline, 'the process never reached the gate'
    time.sleep(0.05)


def test_evaluate_ctrl_c_and_sigterm_are_one_line_each(tmp_path):
  gate, gated = gated_config(tmp_path)
  out = tmp_path / 'run'
  gate.write_text('')  # open while the run trains
  # A process: the config.gin it saves imports tests.sweep_gate as rl.evaluate's process does.
  trained = cli_process(f'--config_file={REINFORCE}', f'--config_file={gated}',
                        f'--output_dir={out}', *[f'--config={b}' for b in TINY])
  assert trained.returncode == 0, trained.stderr
  gate.unlink()  # closed: each evaluation below is held in its first step
  before = snapshot(out)
  for sig, status, cause in ((signal.SIGINT, 130, ''), (signal.SIGTERM, 143, 'SIGTERM: ')):
    proc = subprocess.Popen([sys.executable, '-m', 'rl.evaluate', f'--output_dir={out}'],
                            cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=default_sigint)
    wait_for_marker(proc, f'{gate}.waiting-{proc.pid}')
    proc.send_signal(sig)
    _, stderr = proc.communicate(timeout=120)
    assert proc.returncode == status, stderr
    assert one_line(stderr) == (f'rl.evaluate: {cause}interrupted; the run folder is unchanged: '
                                'rerun the same command to evaluate it.')
  assert snapshot(out) == before


def test_sigterm_stops_a_sweep_and_its_runs_and_a_rerun_resumes(tmp_path):
  grid = tmp_path / 'grid.yaml'
  grid.write_text('RLTask.n_envs: [4]\n')
  out = tmp_path / 'sweep'
  gate, gated = gated_config(tmp_path)
  args = [f'--config_file={REINFORCE}', f'--config_file={gated}', f'--sweep={grid}',
          f'--output_dir={out}', '--seeds=0', '--parallel=1',
          *[f'--config={b}' for b in TINY_WITHOUT_ENVS]]
  midway, status, stdout, stderr = sweep_helpers.interrupt_midway(args, out, gate, signal.SIGTERM)
  assert midway is not None, 'no run of the sweep reached its gate'
  assert status == 143, stdout + stderr
  assert stderr == ''
  last = stdout.strip().splitlines()[-1]
  assert last.startswith('[sweep] SIGTERM: interrupted: 1 runs cut short'), stdout
  assert 'rerun the same command to resume' in last
  # The sweep's SIGTERM reached its rl.run, which finished its epoch and stopped with
  # its own line.
  assert sweep_helpers.lock_is_free(midway)
  with open(str(midway) + '.log') as f:
    assert 'rl.run: SIGTERM: stopped after epoch 2/3, checkpointed' in f.read()
  assert sweep_helpers.epochs_logged(midway) == [1, 2]

  gate.write_text('')
  rerun = sweep_helpers.cli(*args, timeout=300)
  assert rerun.returncode == 0, rerun.stdout + rerun.stderr
  assert sweep_helpers.epochs_logged(midway) == [1, 2, 3]
  with open(str(midway) + '.log') as f:
    assert f'Resuming {midway} from epoch 2/' in f.read()
