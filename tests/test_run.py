"""The runner end to end: outputs, resume, bad input (one line, non-zero, folder intact)."""
import os
import shutil
import signal
import subprocess
import sys
import time

import jax
import numpy as np
import pytest

from rl import experiment
from rl import run_folder
from rl.data.checkpoints import Checkpointer
from rl.errors import ConfigError
from rl.errors import NonFiniteLossError
from rl.errors import OutputDirError
from rl.metrics import TIMING_KEYS
from rl.metrics import read_metrics
import run_helpers
from run_helpers import REINFORCE
from run_helpers import ROOT
from run_helpers import TINY
from run_helpers import assert_one_line_error
from run_helpers import cli
import sweep_gate


def snapshot(folder):
  return run_helpers.snapshot(folder, ignore=('.lock',))


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
  assert f'eval return {eval_return:.1f}.' in result.stdout.splitlines()[-2]
  # The log file ends with the console's last line.
  with open(tmp_path / 'c' / 'log.txt') as f:
    assert f.read().splitlines()[-1].endswith(result.stdout.splitlines()[-1])


def final_params(folder):
  step, arrays, _ = Checkpointer(os.path.join(folder, 'checkpoints')).restore_latest()
  return step, arrays['trainers']['policy']['params']


def without_timing(records):
  return [{k: v for k, v in r.items() if k not in TIMING_KEYS} for r in records]


def gated_config(tmp_path):
  """(gate, config) for tests/sweep_gate.py's CartPole, which waits at the gate file.

  A run on it stops inside the epoch after its first checkpoint until the
  test creates the gate, so a signal always finds it there, however loaded
  the machine is; with the gate already there it is CartPole-v1.
  """
  gate = tmp_path / 'gate'
  gated = tmp_path / 'gated.gin'
  gated.write_text('import tests.sweep_gate\n'
                   "RLTask.env = 'rl_test/GatedCartPole-v1'\n"
                   f'RLTask.env_kwargs = {{"gate": {str(gate)!r}}}\n')
  return gate, gated


def wait_for_checkpoint(proc, out, epoch, gate):
  """Waits until the run has checkpoint `epoch` and is held at `gate` (past its save)."""
  checkpoint = out / 'checkpoints' / str(epoch)
  deadline = time.time() + 180
  while (not (checkpoint.exists() and sweep_gate.waiting(gate)) and proc.poll() is None
         and time.time() < deadline):
    time.sleep(0.05)
  assert proc.poll() is None and checkpoint.exists(), 'the run never reached its checkpoint'
  assert sweep_gate.waiting(gate), 'the run never reached the gate'


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
    # the resumed run continues each running episode's window exactly.
    'ppo_transformer': [PPO_TRANSFORMER, 'RLTask.n_envs = 2', 'RLTask.context_length = 4',
                        'PPO.n_interactions_per_epoch = 32', 'PPO.policy_batch_size = 8',
                        'PPO.value_batch_size = 8', 'PPO.policy_train_steps_per_epoch = 2',
                        'PPO.value_train_steps_per_epoch = 2', 'PPO.n_eval_episodes = 1',
                        'PPO.eval_every = 2', 'TransformerDecoder.d_model = 8',
                        'TransformerDecoder.d_ff = 8', 'TransformerDecoder.n_heads = 2'],
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
  """SIGINT: one line naming the epoch and the last checkpoint, exit 130, then a resume.

  The run waits at gated_config's gate after its first checkpoint, so the
  signal always finds it inside epoch 2 with checkpoint 1 written.
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
  _, stderr = proc.communicate(timeout=120)
  assert proc.returncode == 130, stderr
  lines = stderr.strip().splitlines()
  assert len(lines) == 1, stderr
  assert 'interrupted in epoch 2/3' in lines[0]
  assert 'the last checkpoint is epoch 1' in lines[0]
  assert 'rerun the same command to resume' in lines[0]

  gate.write_text('')
  resumed = cli(*args)
  assert resumed.returncode == 0, resumed.stderr
  assert f'Resuming {out} from epoch 1/3: ' in resumed.stdout
  assert [r['epoch'] for r in read_metrics(out)] == [1, 2, 3]


def test_same_seed_same_numbers_and_seed_flag_changes_them(tmp_path):
  a = experiment.execute([REINFORCE], TINY, str(tmp_path / 'a'))
  b = experiment.execute([REINFORCE], TINY, str(tmp_path / 'b'))
  c = experiment.execute([REINFORCE], TINY, str(tmp_path / 'c'), seed=5)
  assert without_timing(a.history) == without_timing(b.history)
  assert without_timing(a.history) != without_timing(c.history)


# -- bad input ------------------------------------------------------------------


@pytest.mark.parametrize('env_id, needles', [
    # A namespace that its package registers on first use: ids of that namespace
    # only (tests/test_envs.py covers the package missing).
    ('ALE/Pongg-v5', ["Did you mean 'ALE/Pong-v5'"]),
    ('MinAtar/Breakot-v1', ["Did you mean 'MinAtar/Breakout-v1'"]),
    # No namespace: suggestions stay among the ids without one, by name.
    ('CartPol-v1', ["Did you mean 'CartPole-v1'"]),
])
def test_cli_unknown_env_suggests_only_its_own_namespace(tmp_path, env_id, needles):
  out = tmp_path / 'x'
  result = cli(f'--config_file={REINFORCE}', f"--config=RLTask.env = '{env_id}'",
               f'--output_dir={out}')
  assert_one_line_error(result, f'{env_id!r}', *needles)
  assert 'Ant-v5' not in result.stderr and 'phys2d/' not in result.stderr
  assert result.returncode == 2
  assert not out.exists()


def missing_dependency_envs():
  """The fake env of tests/missing_dependency_env.py, and gymnasium's own where it applies."""
  fake = pytest.param(['import tests.missing_dependency_env',
                       "RLTask.env = 'rl_test/NeedsMissingPackage-v0'"],
                      'rl_test/NeedsMissingPackage-v0',
                      'pip install "gymnasium[rl-test-missing]"', id='fake')
  try:
    import Box2D  # pylint: disable=import-outside-toplevel,unused-import
    box2d = pytest.param(None, None, None, id='LunarLander-v3',
                         marks=pytest.mark.skip(reason='box2d is installed here'))
  except ImportError:
    box2d = pytest.param(["RLTask.env = 'LunarLander-v3'"], 'LunarLander-v3',
                         "pip install '.[box2d]'", id='LunarLander-v3')
  return [fake, box2d]


@pytest.mark.parametrize('bindings, env_id, install', missing_dependency_envs())
def test_cli_env_with_a_missing_package_names_the_install_command(tmp_path, bindings, env_id,
                                                                    install):
  out = tmp_path / 'x'
  result = cli(f'--config_file={REINFORCE}', *[f'--config={b}' for b in bindings],
               f'--output_dir={out}')
  assert_one_line_error(result, f'{env_id!r}', 'not installed', install)
  assert 'Traceback' not in result.stderr
  assert result.returncode == 2
  assert not out.exists()


def test_cli_unsupported_observation_space_is_named(tmp_path):
  out = tmp_path / 'x'
  result = cli(f'--config_file={REINFORCE}', "--config=RLTask.env = 'Blackjack-v1'",
               f'--output_dir={out}')
  assert_one_line_error(result, "'Blackjack-v1'", 'observation space Tuple(', 'Box', 'Discrete')
  assert 'check the types of its gin bindings' not in result.stderr
  assert result.returncode == 2
  assert not out.exists()


def test_cli_missing_config_file(tmp_path):
  result = cli('--config_file=configs/nope.gin', f'--output_dir={tmp_path / "x"}')
  assert_one_line_error(result, 'configs/nope.gin', 'does not exist')


# -- the command line a new user types ----------------------------------------


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


def test_cli_without_arguments_says_what_works():
  result = cli()
  assert_one_line_error(result, '--config_file=', 'to start a run', '--output_dir=',
                        'to resume one')
  assert result.returncode == 2


@pytest.mark.parametrize('stray', ['configs/ppo_cartpole.gin', 'configs/mine.gin', 'README.md'])
def test_cli_config_file_without_the_flag_points_to_it(tmp_path, stray):
  out = tmp_path / 'x'
  result = cli(stray, f'--output_dir={out}')
  assert_one_line_error(result, f"'{stray}'", f'--config_file={stray}')
  assert result.returncode == 2
  assert not out.exists()


@pytest.mark.parametrize('flag, needles', [
    ('--confg_file=x', ["Unknown command line flag 'confg_file'", 'Did you mean: config_file']),
    ('--seed=abc', ['--seed=abc', '--seed takes int values']),
])
def test_cli_bad_flag_is_one_line_and_exit_2(tmp_path, flag, needles):
  out = tmp_path / 'x'
  result = cli(flag, f'--config_file={REINFORCE}', f'--output_dir={out}')
  assert_one_line_error(result, *needles, '--helpshort')
  assert result.returncode == 2
  assert not out.exists()


@pytest.mark.parametrize('module,flag,known', [
    ('rl.evaluate', '--outptu_dir=x', 'output_dir'),
    ('launch.sweep', '--sweeep=x.yaml', 'sweep'),
])
def test_misspelt_flag_of_the_other_commands_is_one_line_and_exit_2(module, flag, known):
  result = subprocess.run([sys.executable, '-m', module, flag], cwd=ROOT, capture_output=True,
                          text=True, timeout=240)
  assert_one_line_error(result, f'{module}: error:', known, '--helpshort')
  assert result.returncode == 2


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
