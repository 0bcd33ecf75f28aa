"""The JAX-native backend (gymnax envs): layout, one-call epochs, resume, refusals."""
import os
import subprocess
import sys

import gin
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from rl.envs import gymnax_envs as jax_envs
from rl.data import slices
from rl.errors import ConfigError
from rl.metrics import TIMING_KEYS
from rl.metrics import read_metrics
from rl.envs.task import RLTask
from rl.algorithms import A2C
from rl.algorithms import DQN
from rl.algorithms import PPO
from rl.algorithms import PPOJoint
from rl.algorithms import PolicyGradientTrainer
from run_helpers import PPO_JAX
from run_helpers import ROOT
from run_helpers import TINY_PPO_JAX
from run_helpers import cli
from run_helpers import killed_and_resumed_jax_run

pytest.importorskip('gymnax')

CARTPOLE = 'gymnax:CartPole-v1'


@pytest.fixture(autouse=True)
def clean_gin():
  gin.clear_config()
  yield
  gin.clear_config()


# -- the rollout's trajectory layout -------------------------------------------------

def hand_rollout():
  """2 envs x 3 steps. Env 0: its episode ends (terminated) at step 1 and a new one
  runs to the strip's end. Env 1: truncated at step 2, its strip's last step.

  Observations are 10 * env + step; final observations 100 + that.
  """
  obs = np.array([[0, 10], [1, 11], [2, 12]], np.float32)[..., None]  # [T, N, 1]
  return jax_envs.Rollout(
      observation=jnp.asarray(obs),
      action=jnp.array([[1, 0], [0, 1], [1, 1]], jnp.int32),
      reward=jnp.array([[1., 2.], [3., 4.], [5., 6.]], jnp.float32),
      dist_inputs=jnp.zeros((3, 2, 2), jnp.float32),
      terminated=jnp.array([[False, False], [True, False], [False, False]]),
      ended=jnp.array([[False, False], [True, False], [False, True]]),
      final_obs=jnp.asarray(obs + 100),
      episode_return=jnp.zeros((3, 2), jnp.float32))


def test_rollout_slices_store_segments_as_the_task_does():
  data, n_segments = jax.jit(jax_envs.rollout_slices, static_argnums=1)(hand_rollout(), 0.5)
  data = jax.device_get(data)
  rows = data.rows
  # Env 0: segment [s0, s1 | final 101] then [s2 | final 102]; env 1: [s0, s1, s2 | final 112].
  assert int(n_segments) == 3
  n = 9
  assert len(data.row_end) == jax_envs.rollout_capacity(3, 2) == 16
  np.testing.assert_array_equal(rows['observation'][:n, 0],
                                [0, 1, 101, 2, 102, 10, 11, 12, 112])
  np.testing.assert_array_equal(rows['mask'][:n], [1, 1, 0, 1, 0, 1, 1, 1, 0])
  np.testing.assert_array_equal(rows['action'][:n], [1, 0, 0, 1, 0, 0, 1, 1, 0])
  np.testing.assert_array_equal(rows['reward'][:n], [1, 3, 0, 5, 0, 2, 4, 6, 0])
  # done is the termination only: the truncated and the cut segments bootstrap.
  np.testing.assert_array_equal(rows['done'][:n], [0, 1, 0, 0, 0, 0, 0, 0, 0])
  # Discounted returns within each segment, gamma 0.5, nothing after its end.
  np.testing.assert_allclose(rows['return_'][:n],
                             [1 + 0.5 * 3, 3, 0, 5, 0, 2 + 0.5 * 4 + 0.25 * 6, 4 + 0.5 * 6, 6, 0])
  np.testing.assert_array_equal(data.traj_start[:3], [0, 3, 5])
  np.testing.assert_array_equal(data.traj_rows[:4], [3, 2, 4, 0])
  np.testing.assert_array_equal(data.row_end[:n], [3, 3, 3, 5, 5, 9, 9, 9, 9])
  assert not rows['mask'][n:].any() and not data.row_end[n:].any()
  # The slicing code reads it like the task's buffers: windows stop at segment ends.
  window = slices.windows(data, {'reward': jnp.asarray(rows['reward'])}, 3)['reward']
  np.testing.assert_array_equal(np.asarray(window)[:3], [[1, 3, 0], [3, 0, 0], [0, 0, 0]])


# -- the trainer's one-call epoch ------------------------------------------------------

TINY_PPO = dict(n_interactions_per_epoch=32, value_train_steps_per_epoch=2,
                policy_train_steps_per_epoch=2, value_batch_size=16, policy_batch_size=16,
                added_policy_slice_length=4, n_eval_episodes=3)


def test_a_jax_native_epoch_collects_trains_and_evaluates():
  gin.parse_config(['MLP.layer_widths = (8,)'])
  task = RLTask(env=CARTPOLE, n_envs=4, seed=3)
  assert task.jax_native and task.action_space.n == 2
  trainer = PPO(task, **TINY_PPO)
  before = jax.device_get(trainer.learner.train_state.nets['policy']['params'])
  record = trainer.learner.run_epoch()
  assert record['env_steps'] == task.n_interactions == 32
  assert record['n_trajectories'] >= 4  # at least each env's running segment
  assert np.isfinite(record['policy_loss']) and np.isfinite(record['value_loss'])
  assert trainer.learner.networks['policy'].step == trainer.learner.networks['value'].step == 2
  after = jax.device_get(trainer.learner.train_state.nets['policy']['params'])
  assert not all(np.array_equal(a, b) for a, b in zip(jax.tree_util.tree_leaves(before),
                                                      jax.tree_util.tree_leaves(after)))
  # Evaluation is a pure function of (seed, epoch): played again, the same returns.
  returns = trainer.learner.episode_returns(0.0)
  assert len(returns) == 3 and np.mean(returns) == pytest.approx(record['eval_return'])
  np.testing.assert_array_equal(returns, trainer.learner.episode_returns(0.0))


def test_the_joint_trainer_runs_on_jax_native_envs():
  gin.parse_config(['MLP.layer_widths = (8,)'])
  trainer = PPOJoint(RLTask(env=CARTPOLE, n_envs=2), n_interactions_per_epoch=16,
                     train_steps_per_epoch=2, batch_size=8, max_slice_length=2,
                     added_policy_slice_length=2, advantage_estimator=jax_gae())
  record = trainer.learner.run_epoch()
  assert np.isfinite(record['joint_loss']) and record['env_steps'] == 16


def test_the_epoch_dispatched_ahead_changes_no_number_and_yields_to_a_new_state():
  gin.parse_config(['MLP.layer_widths = (8,)'])

  def make(last_epoch=None):
    trainer = PPO(RLTask(env=CARTPOLE, n_envs=4, seed=3), **dict(TINY_PPO, n_eval_episodes=0))
    # As the epoch loop sets it; with epochs still to come, each epoch
    # dispatches the next before its metrics are read back.
    trainer.learner.last_epoch = last_epoch
    return trainer

  def numbers(record):  # NaN (no episode ended yet) as None, which compares equal
    return {k: None if v != v else v for k, v in record.items()
            if k not in TIMING_KEYS and 'per_second' not in k}
  one_by_one, ahead = make(), make(last_epoch=4)
  assert [numbers(ahead.learner.run_epoch()) for _ in range(3)] == \
      [numbers(one_by_one.learner.run_epoch()) for _ in range(3)]
  # Epoch 1 ran alone (the process's first call); epochs 2-4 run in one call,
  # dispatched as epoch 1 was read.
  current = ahead.learner.look_ahead.current
  assert (current.call.firsts, current.call.n) == ([2], 3)
  # Another state of the same epoch put in place meanwhile (a restore): the
  # next epoch starts from it, not from the call's.
  arrays, meta = jax.device_get(one_by_one.state_dict())
  arrays = jax.tree_util.tree_map(lambda x: x + 0.5 if x.dtype == np.float32 else x, arrays)
  for trainer in (one_by_one, ahead):
    trainer.load_state_dict(arrays, meta)
  assert numbers(ahead.learner.run_epoch()) == numbers(one_by_one.learner.run_epoch())
  assert not ahead.learner.look_ahead.queued  # nothing comes after the last epoch


def test_dqn_keeps_its_replay_on_the_device_and_resumes_exactly():
  gin.parse_config(['MLP.layer_widths = (8,)'])

  def make():
    return DQN(RLTask(env=CARTPOLE, n_envs=2, seed=1), n_interactions_per_epoch=16,
               n_replay_epochs=3, value_train_steps_per_epoch=4, value_batch_size=8,
               max_slice_length=3, sync_freq=3)
  trainer = make()
  records = [trainer.learner.run_epoch() for _ in range(4)]
  replay = trainer.task.carry.replay
  assert int(replay.written) == 4
  # A ring of 3 epochs (4 slots, a power of two): epochs 4, 2, 3 in slots 0-2.
  steps_per_slot = np.asarray(replay.epochs.rows['mask']).sum(axis=1)
  np.testing.assert_array_equal(steps_per_slot, [16, 16, 16, 0])
  assert records[-1]['exploration_rate'] == pytest.approx(trainer.exploration_rate(4))
  arrays, meta = jax.device_get(trainer.state_dict())
  ahead = trainer.learner.run_epoch()
  # Back to the saved state (the same trainer, so nothing compiles again): the
  # same epoch again, number for number.
  trainer.load_state_dict(arrays, meta)
  again = trainer.learner.run_epoch()
  drop = ('time_collect', 'time_train', 'time_eval', 'env_steps_per_second')
  assert {k: v for k, v in ahead.items() if k not in drop and 'per_second' not in k} == \
      {k: v for k, v in again.items() if k not in drop and 'per_second' not in k}


def jax_gae():
  from rl.ops import advantages  # pylint: disable=import-outside-toplevel
  return advantages.gae


# -- refusals: one line each --------------------------------------------------------------

@pytest.mark.parametrize('make, words', [
    (lambda: RLTask(env='gymnax:CartPol-v1'), "Did you mean 'gymnax:CartPole-v1'"),
    (lambda: RLTask(env=CARTPOLE, num_stacked_frames=4), 'num_stacked_frames = 4 is not supported'),
    (lambda: PolicyGradientTrainer(RLTask(env=CARTPOLE)),
     'PolicyGradientTrainer does not support JAX-native envs'),
    (lambda: A2C(RLTask(env=CARTPOLE)), 'set n_interactions_per_epoch'),
    (lambda: RLTask(env=CARTPOLE, env_kwargs={'gravity_x': 1.0}), "no parameter 'gravity_x'"),
])
def test_unsupported_input_is_refused_in_one_line(make, words):
  with pytest.raises(ConfigError) as info:
    make()
  # gin adds a line naming the configurable; the runner prints the first.
  assert words in str(info.value).splitlines()[0]


def test_the_runner_refuses_an_unknown_jax_env_in_one_line(tmp_path):
  result = cli(f'--config_file={PPO_JAX}', "--config=RLTask.env = 'gymnax:Breakout-MinAtarr'",
               f'--output_dir={tmp_path / "r"}')
  assert result.returncode != 0
  lines = result.stderr.strip().splitlines()
  assert len(lines) == 1 and "Did you mean 'gymnax:Breakout-MinAtar'" in lines[0], lines


# -- the runner: resume after SIGKILL is exact --------------------------------------------

FLAGS = [f'--config_file={PPO_JAX}', '--config=train_rl.n_epochs = 4',
         '--config=train_rl.checkpoint_every = 2', '--config=PPO.eval_every = 2',
         *[f'--config={b}' for b in TINY_PPO_JAX]]


def test_sigkill_mid_run_then_resume_is_bit_exact_on_jax_native_envs(tmp_path):
  # The gate holds every epoch after the first checkpoint, so SIGKILL finds
  # the run inside epoch 3 with checkpoint 2 written, however loaded the machine.
  killed = tmp_path / 'killed'
  resumed = killed_and_resumed_jax_run(FLAGS, killed, killed, 2, tmp_path)
  assert resumed.returncode == 0, resumed.stderr
  assert 'Resuming' in resumed.stdout
  # The straight run is not about a process: it runs in this one (run_helpers.cli).
  straight = tmp_path / 'straight'
  done = cli(*FLAGS, f'--output_dir={straight}')
  assert done.returncode == 0, done.stderr

  def numbers(folder):
    return [{k: v for k, v in r.items() if k not in TIMING_KEYS and 'per_second' not in k}
            for r in read_metrics(folder)]
  assert numbers(killed) == numbers(straight)
  assert len(numbers(straight)) == 4 and 'eval_return' in numbers(straight)[-1]


def test_a_restored_env_carry_has_the_types_of_a_fresh_one():
  """A resumed run's epoch is the program a fresh run compiled (docs/performance.md, the
  persistent compilation cache): its inputs' shapes, dtypes and weak types are the same."""
  def avals(task):
    return [(x.shape, x.dtype, x.aval.weak_type) for x in jax.tree_util.tree_leaves(task.carry)]
  fresh = RLTask(env=CARTPOLE, n_envs=2, seed=0)
  restored = RLTask(env=CARTPOLE, n_envs=2, seed=1)
  restored.load_state_dict(*fresh.state_dict())
  assert avals(restored) == avals(fresh)
  assert not any(weak for _, _, weak in avals(fresh))


# -- many seeds in one process --------------------------------------------------------------

def test_parse_seeds():
  from rl.seeds import parse_seeds  # pylint: disable=import-outside-toplevel
  assert parse_seeds('0-3') == [0, 1, 2, 3]
  assert parse_seeds('5') == [5]
  assert parse_seeds('0-2,9') == [0, 1, 2, 9]
  for bad in ('a', '3-1', '1,1', '0-'):
    with pytest.raises(ConfigError):
      parse_seeds(bad)




def test_seeds_train_together_into_ordinary_run_folders(tmp_path):
  import shutil  # pylint: disable=import-outside-toplevel
  from rl import evaluate  # pylint: disable=import-outside-toplevel
  from rl import report  # pylint: disable=import-outside-toplevel
  from rl import experiment as run_lib  # pylint: disable=import-outside-toplevel
  out = tmp_path / 'seeds'
  bindings = [f[len('--config='):] for f in FLAGS[1:]]
  trainers = run_lib.execute_seeds([PPO_JAX], bindings, str(out), [0, 1])
  assert sorted(os.listdir(out)) == ['seed_0', 'seed_1'] and [t.epoch for t in trainers] == [4, 4]

  def numbers(folder):
    return [{k: v for k, v in r.items() if k not in TIMING_KEYS and 'per_second' not in k}
            for r in read_metrics(folder)]
  straight = {seed: numbers(out / f'seed_{seed}') for seed in (0, 1)}
  # Back to the checkpoints of epoch 2, then the same command again: each seed
  # resumes from its own checkpoint and redoes epochs 3 and 4 exactly.
  for seed in (0, 1):
    shutil.rmtree(out / f'seed_{seed}' / 'checkpoints' / '4')
  trainers = run_lib.execute_seeds([PPO_JAX], bindings, str(out), [0, 1])
  assert [t.epoch for t in trainers] == [4, 4]
  for seed in (0, 1):
    folder = out / f'seed_{seed}'
    assert {'config.gin', 'metrics.jsonl', 'log.txt', 'checkpoints'} <= set(os.listdir(folder))
    assert f'RLTask.seed = {seed}' in (folder / 'config.gin').read_text()
    assert 'Resuming' in (folder / 'log.txt').read_text()
    assert numbers(folder) == straight[seed]
  # rl.evaluate replays the logged evaluation of the last epoch from a seed's checkpoint.
  result = evaluate.evaluate_run(str(out / 'seed_1'), n_episodes=2)
  assert result['epoch'] == 4
  assert result['mean'] == pytest.approx(straight[1][-1]['eval_return'])
  # Different seeds, different runs; rl.report finds both under the parent folder.
  assert straight[0][-1]['policy_loss'] != straight[1][-1]['policy_loss']
  assert sorted(os.path.basename(r) for r in report.find_runs(str(out))) == ['seed_0', 'seed_1']


def test_ctrl_c_during_seeds_says_where_each_seed_stopped(tmp_path, monkeypatch):
  from rl import experiment as run_lib  # pylint: disable=import-outside-toplevel
  from rl.errors import Interrupted  # pylint: disable=import-outside-toplevel
  from rl.learner import loop as loop_lib  # pylint: disable=import-outside-toplevel

  def interrupt(loop, record, epoch_start):
    del loop, record, epoch_start
    raise KeyboardInterrupt
  # Ctrl-C arrives while the first epoch is being booked, before any checkpoint.
  monkeypatch.setattr(loop_lib.EpochLoop, 'finish', interrupt)
  bindings = [f[len('--config='):] for f in FLAGS[1:]]
  with pytest.raises(Interrupted) as stopped:
    run_lib.execute_seeds([PPO_JAX], bindings, str(tmp_path / 'seeds'), [0, 1])
  message = str(stopped.value)
  assert '\n' not in message
  for seed in (0, 1):
    assert f'seed_{seed} in epoch 1/4 (last checkpoint: none)' in message
  assert str(tmp_path / 'seeds') in message and 'rerun the same command' in message


def test_seeds_on_gymnasium_envs_run_one_after_the_other(tmp_path):
  from rl import experiment as run_lib  # pylint: disable=import-outside-toplevel
  from run_helpers import REINFORCE  # pylint: disable=import-outside-toplevel
  from run_helpers import TINY  # pylint: disable=import-outside-toplevel
  trainers = run_lib.execute_seeds([REINFORCE], TINY + ['train_rl.n_epochs = 1'],
                                   str(tmp_path), [3, 4])
  assert [t.task.seed for t in trainers] == [3, 4]
  # On gymnasium envs a seed of the batch is the same run as that seed alone.
  single = run_lib.execute([REINFORCE], TINY + ['train_rl.n_epochs = 1'],
                           str(tmp_path / 'single_4'), 4)
  def numbers(folder):
    return [{k: v for k, v in r.items() if k not in TIMING_KEYS and 'per_second' not in k}
            for r in read_metrics(folder)]
  assert numbers(tmp_path / 'seed_4') == numbers(tmp_path / 'single_4')
  assert single.history[0]['train_return'] != trainers[0].history[0]['train_return']


def test_gymnax_rendering_modules_load_only_when_something_draws():
  code = ('import sys\n'
          'from rl.envs import gymnax_envs as jax_envs\n'
          "jax_envs.make('gymnax:CartPole-v1')\n"
          "assert 'seaborn.palettes' not in sys.modules and 'matplotlib.figure' not in sys.modules\n"
          'import seaborn, matplotlib.pyplot as plt\n'
          "assert len(seaborn.color_palette('cubehelix', 3)) == 3 and callable(plt.subplots)\n"
          "assert type(sys.modules['seaborn']).__name__ == 'module'\n")
  result = subprocess.run([sys.executable, '-c', code], cwd=ROOT, capture_output=True, text=True,
                          timeout=120)
  assert result.returncode == 0, result.stderr


DQN_JAX = os.path.join(ROOT, 'configs', 'dqn_cartpole_jax.gin')


def test_seeds_of_a_dqn_hold_their_own_target_networks_and_resume_exactly(tmp_path):
  import shutil  # pylint: disable=import-outside-toplevel
  from rl import experiment as run_lib  # pylint: disable=import-outside-toplevel
  from rl.data.checkpoints import Checkpointer  # pylint: disable=import-outside-toplevel
  out = tmp_path / 'seeds'
  # 3 gradient steps an epoch and sync_freq 5: at the epoch-2 checkpoint
  # (step 6) each seed's held target is its network of step 5.
  bindings = ['train_rl.n_epochs = 4', 'train_rl.checkpoint_every = 2', 'RLTask.n_envs = 2',
              'MLP.layer_widths = (8,)', 'DQN.n_interactions_per_epoch = 16',
              'DQN.value_train_steps_per_epoch = 3', 'DQN.value_batch_size = 8',
              "DQN.target_sync = 'global'", 'DQN.sync_freq = 5', 'DQN.n_replay_epochs = 4',
              'DQN.n_eval_episodes = 2', 'DQN.eval_every = 2']
  run_lib.execute_seeds([DQN_JAX], bindings, str(out), [0, 1])

  def saved(seed):
    return Checkpointer(str(out / f'seed_{seed}' / 'checkpoints')).restore_latest()[1]

  def equal(a, b):
    leaves_a, leaves_b = jax.tree_util.tree_leaves(a), jax.tree_util.tree_leaves(b)
    return len(leaves_a) == len(leaves_b) and all(
        np.array_equal(x, y) for x, y in zip(leaves_a, leaves_b))

  def numbers(folder):
    return [{k: v for k, v in r.items() if k not in TIMING_KEYS and 'per_second' not in k}
            for r in read_metrics(folder)]
  finished = {seed: saved(seed) for seed in (0, 1)}
  straight = {seed: numbers(out / f'seed_{seed}') for seed in (0, 1)}
  for seed in (0, 1):
    shutil.rmtree(out / f'seed_{seed}' / 'checkpoints' / '4')
  at_2 = {seed: saved(seed) for seed in (0, 1)}
  for seed in (0, 1):
    target, online = at_2[seed]['extra']['target'], at_2[seed]['trainers']['value']['params']
    assert int(at_2[seed]['trainers']['value']['step']) == 6
    assert not equal(target['params'], online)
  assert not equal(at_2[0]['extra']['target'], at_2[1]['extra']['target'])
  # The same command again: each seed resumes from its own checkpoint, target
  # included, and redoes epochs 3 and 4 number for number.
  run_lib.execute_seeds([DQN_JAX], bindings, str(out), [0, 1])
  for seed in (0, 1):
    assert numbers(out / f'seed_{seed}') == straight[seed]
    assert equal(saved(seed)['extra'], finished[seed]['extra'])
    assert equal(saved(seed)['trainers'], finished[seed]['trainers'])
