"""Stacked observations stored one frame per step (rl.data.frames): the rebuilt stacks, resume.

The stacks rebuilt from the stored frames must be exactly the observations
the env returned: every row, the final observations of ended episodes, and
the first rows of trajectories that start inside an episode (an epoch's end
cut it there). The Chain env's observations are its step counts, so there
the expected stacks are known in closed form; on CartPole and Pong a
recording wrapper keeps what the env returned.
"""
import os
import shutil

import gin
import gymnasium as gym
import jax
import numpy as np
import pytest

from rl.data import frames
from rl import experiment as run_lib
from rl.data import slices
from rl.data.checkpoints import Checkpointer
from rl.metrics import TIMING_KEYS
from rl.metrics import read_metrics
from rl.envs.task import RLTask
from task_helpers import built_task
from rl.algorithms.a2c import A2C
from run_helpers import ROOT


DQN_CONFIG = os.path.join(ROOT, 'configs', 'dqn_cartpole.gin')


def random_policy(task, seed=0):
  rng = np.random.default_rng(seed)

  def policy(obs):
    n = obs.shape[0]
    return rng.integers(0, task.action_space.n, size=n), np.zeros((n, 1), np.float32)
  return policy


def rebuilt(task, epochs=None):
  """(EpochData, every stored row's observation rebuilt on the device, the SliceData)."""
  data = task.slice_data(epochs)
  stored = task.storage.selected(epochs)
  obs = np.asarray(jax.jit(slices.observations)(data))[:len(stored.rows['mask'])]
  return stored, obs, data


def trajectories(stored, obs):
  for start, rows in zip(stored.traj_start, stored.traj_rows):
    yield obs[start:start + rows]


def assert_sampled_rows_are_the_rebuilt_rows(data, obs):
  """slices.sample's observations are those of the rows it drew (zeros past a trajectory)."""
  row = np.arange(1, len(data.row_end) + 1, dtype=np.int32)  # 0: no row
  tagged = data.replace(rows=dict(data.rows, row=row))
  fields = jax.jit(slices.sample, static_argnums=(2, 3, 4))(
      tagged, jax.random.PRNGKey(0), 256, 6, 8)
  drawn, sampled = np.asarray(fields['row']), np.asarray(fields['observation'])
  assert (drawn > 0).any() and (drawn == 0).any()
  for b, p in zip(*np.nonzero(drawn)):
    np.testing.assert_array_equal(sampled[b, p], obs[drawn[b, p] - 1])
  assert not sampled[drawn == 0].any()


# -- closed form: the Chain env ------------------------------------------------------------

def chain_stack(t, n=4):
  """The stacked observation of Chain step t: steps t - 3 .. t, the reset frame 0 repeated."""
  return np.maximum(np.arange(t - n + 1, t + 1), 0).astype(np.float32)


@pytest.mark.parametrize('max_steps', [None, 4])
def test_chain_stacks_are_rebuilt_across_epochs_cuts_and_episode_ends(max_steps):
  task = built_task(env='rl_test/Chain-v0', env_kwargs={'length': 11}, n_envs=2,
                    num_stacked_frames=4, max_steps=max_steps, n_replay_epochs=5, seed=0)
  for epoch in range(1, 6):  # 7 steps an env each: episodes of 11 span epochs
    task.collect(random_policy(task), n_interactions=14, epoch_id=epoch)
  stored, obs, data = rebuilt(task)
  assert stored.rows['observation'].shape[1:] == (1,)  # one frame a row
  starts = []
  for traj in trajectories(stored, obs):
    t0 = int(traj[0, -1])
    starts.append(t0)
    for i, row in enumerate(traj):
      np.testing.assert_array_equal(row, chain_stack(t0 + i))
  # Trajectories that start inside episodes and at their resets, and episodes
  # that ended (the final observation, step 11, is a row).
  assert 0 in starts and any(t0 >= 3 for t0 in starts)
  assert any(traj[-1, -1] == 11 for traj in trajectories(stored, obs))
  # A trajectory at an episode's reset keeps no context, one inside keeps 3
  # frames at most: fewer when its stack still repeats the reset frame.
  assert max(stored.traj_context) == 3
  assert all(c == min(t0, 3) for t0, c in zip(starts, stored.traj_context))
  assert_sampled_rows_are_the_rebuilt_rows(data, obs)
  task.close()


def test_context_keeps_repeated_old_frames_once():
  def stack(*values):
    return np.array(values, np.float32)
  # At a reset the stack repeats the first frame: nothing to keep.
  assert frames.context(stack(5, 5, 5), stack(5), 4).shape == (0, 1)
  np.testing.assert_array_equal(frames.context(stack(1, 2, 3), stack(4), 4)[:, 0], [1, 2, 3])
  # Two steps after a reset: the reset frame once, then the other.
  np.testing.assert_array_equal(frames.context(stack(7, 7, 8), stack(9), 4)[:, 0], [7, 8])
  # Equal frames elsewhere are real frames and stay.
  np.testing.assert_array_equal(frames.context(stack(1, 2, 2), stack(2), 4)[:, 0], [1, 2, 2])


def test_frame_indices_point_at_the_rows_then_their_contexts():
  # Two trajectories of 3 and 2 rows; the second has 2 context frames, which
  # follow the 5 row frames.
  index = frames.frame_indices([0, 3], [3, 2], [0, 2], 5, 3)
  np.testing.assert_array_equal(index, [[0, 0, 0], [0, 0, 1], [0, 1, 2],
                                        [5, 6, 3], [6, 3, 4]])


# -- recorded: CartPole and Pong ---------------------------------------------------------------

class Recorder(gym.vector.VectorWrapper):
  """Keeps every observation the vector env returns, by env and episode, final ones included."""

  def __init__(self, env, first_obs):
    super().__init__(env)
    self.episodes = [[[obs]] for obs in first_obs]

  def step(self, actions):
    obs, reward, terminated, truncated, info = self.env.step(actions)
    for j, episodes in enumerate(self.episodes):
      if terminated[j] or truncated[j]:
        episodes[-1].append(info['final_obs'][j])
        episodes.append([obs[j]])
      else:
        episodes[-1].append(obs[j])
    return obs, reward, terminated, truncated, info


def recorded_task(n_epochs, steps_per_env, **kwargs):
  task = built_task(n_envs=2, num_stacked_frames=4, n_replay_epochs=n_epochs, seed=1, **kwargs)
  task._ensure_started()  # pylint: disable=protected-access
  recorder = Recorder(task._env, task._obs)  # pylint: disable=protected-access
  task._env = recorder  # pylint: disable=protected-access
  for epoch in range(1, n_epochs + 1):
    task.collect(random_policy(task, epoch), n_interactions=2 * steps_per_env, epoch_id=epoch)
  return task, recorder.episodes


def assert_rows_are_what_the_env_returned(task, episodes):
  """Every trajectory's rebuilt rows are consecutive observations of one recorded episode."""
  stored, obs, data = rebuilt(task)
  where = {}  # first observation -> [(episode, position)]
  for episode in (e for env in episodes for e in env):
    for t, o in enumerate(episode):
      where.setdefault(o.tobytes(), []).append((episode, t))
  starts, ends = [], []
  for traj in trajectories(stored, obs):
    found = [(e, t) for e, t in where.get(traj[0].tobytes(), [])
             if len(e) >= t + len(traj) and all(
                 np.array_equal(row, o) for row, o in zip(traj, e[t:t + len(traj)]))]
    assert found, 'a stored trajectory is no run of observations the env returned'
    episode, t = found[0]
    starts.append(t)
    ends.append(t + len(traj) == len(episode))
  n_steps = sum(len(e) - 1 for env in episodes for e in env)
  assert stored.n_steps == n_steps
  assert 0 in starts and max(starts) > 0 and any(ends)
  assert_sampled_rows_are_the_rebuilt_rows(data, obs)


def test_cartpole_stacks_are_rebuilt_as_the_env_returned_them():
  task, episodes = recorded_task(4, 9, env='CartPole-v1')
  assert_rows_are_what_the_env_returned(task, episodes)
  task.close()


def test_pong_stacks_are_rebuilt_as_the_env_returned_them():
  # Episodes truncated after 30 steps end inside the second of 3 epochs of
  # 20 steps an env: cuts, an episode's final observation and a reset.
  task, episodes = recorded_task(3, 20, env='ALE/Pong-v5', atari_preprocessing=True,
                                 time_limit=30)
  assert task.observation_space.shape == (84, 84, 4)
  stored = task.storage.selected(None)
  assert stored.rows['observation'].shape[1:] == (84, 84, 1)
  assert_rows_are_what_the_env_returned(task, episodes)
  task.close()


# -- memory bounds -------------------------------------------------------------------------------

def test_value_blocks_give_the_values_of_one_call(monkeypatch):
  gin.parse_config(['MLP.layer_widths = (8,)'])
  task = RLTask(env='CartPole-v1', n_envs=2, num_stacked_frames=4, seed=0)
  trainer = A2C(task, n_interactions_per_epoch=600, value_train_steps_per_epoch=1,
                policy_train_steps_per_epoch=1)
  trainer.learner.collect(n_interactions=600, epoch_id=1)
  data = task.slice_data()
  value, key = trainer.learner.networks['value'].state, jax.random.PRNGKey(0)

  def state_values(obs, dist_inputs, k):
    return trainer.state_values(value, obs, dist_inputs, k, 'mean')

  def values():
    return np.asarray(jax.jit(lambda d, k: slices.row_values(
        d, task.observation_space, k, state_values))(data, key))
  whole = values()
  # 64 observations of 64 bytes a block: 1024 rows in 16 blocks.
  monkeypatch.setattr(slices, 'VALUE_BLOCK_BYTES', 64 * 64)
  assert slices.block_rows(64, 64 * 64) == 64
  np.testing.assert_allclose(values(), whole, rtol=1e-6, atol=1e-6)
  assert slices.block_rows(4 * 84 * 84, 32 * 2**20) == 1024  # stacked Atari frames
  task.close()


# -- resume ---------------------------------------------------------------------------------------

def without_timing(records):
  return [{k: v for k, v in r.items() if k not in TIMING_KEYS} for r in records]


def trees_equal(a, b):
  if jax.tree_util.tree_structure(a) != jax.tree_util.tree_structure(b):
    return False
  return all(np.array_equal(x, y) for x, y in
             zip(jax.tree_util.tree_leaves(a), jax.tree_util.tree_leaves(b)))


def assert_resume_is_exact(tmp_path, config, bindings, n_epochs):
  """A run resumed from its second-to-last checkpoint ends as the run that went straight on."""
  straight = str(tmp_path / 'straight')
  run_lib.execute([config], bindings + [f'train_rl.n_epochs = {n_epochs}'], straight)
  resumed = str(tmp_path / 'resumed')
  shutil.copytree(straight, resumed)
  shutil.rmtree(os.path.join(resumed, 'checkpoints', str(n_epochs)))
  run_lib.execute([config], bindings + [f'train_rl.n_epochs = {n_epochs}'], resumed)
  records = without_timing(read_metrics(straight))
  assert [r['epoch'] for r in records] == list(range(1, n_epochs + 1))
  assert without_timing(read_metrics(resumed)) == records
  (_, a, _), (_, b, _) = (Checkpointer(os.path.join(f, 'checkpoints')).restore_latest()
                          for f in (straight, resumed))
  # The replay's frames and contexts too. The envs show in what they did (the
  # replay, the metrics), not in their pickles, whose bytes a restore changes.
  assert any('traj_context' in epoch for epoch in a['task']['epochs'].values())
  del a['task']['env_state'], b['task']['env_state']
  # The history (its records hold wall times) is compared above, without its timings.
  del a['history'], b['history']
  assert trees_equal(a, b)


def test_stacked_cartpole_dqn_resumes_exactly(tmp_path):
  # The replay keeps every epoch, so the restored frames and contexts are trained on.
  assert_resume_is_exact(tmp_path, DQN_CONFIG, [
      'RLTask.num_stacked_frames = 4', 'RLTask.n_envs = 2', 'RLTask.initial_trajectories = 2',
      'train_rl.checkpoint_every = 1', 'MLP.layer_widths = (8,)',
      'DQN.n_interactions_per_epoch = 16', 'DQN.value_train_steps_per_epoch = 3',
      'DQN.value_batch_size = 8', 'DQN.max_slice_length = 3', 'DQN.n_eval_episodes = 0'], 2)


def test_pong_dqn_resumes_exactly(tmp_path):
  assert_resume_is_exact(tmp_path, DQN_CONFIG, [
      "RLTask.env = 'ALE/Pong-v5'", 'RLTask.atari_preprocessing = True',
      'RLTask.num_stacked_frames = 4', 'RLTask.n_envs = 2', 'RLTask.initial_trajectories = 0',
      'train_rl.checkpoint_every = 1', 'DQN.value_body = @AtariCnnBody',
      'AtariCnnBody.hidden_sizes = (2, 2, 2)', 'AtariCnnBody.output_size = 8',
      "AtariCnnBody.kernel_initializer = 'atari_conv'",
      'DQN.n_interactions_per_epoch = 16', 'DQN.value_train_steps_per_epoch = 2',
      'DQN.value_batch_size = 4', 'DQN.n_eval_episodes = 0'], 2)


def test_shipped_pong_ppo_joint_config_trains_on_stacks_and_resumes_exactly(tmp_path):
  # The shipped config with a tiny CNN and tiny epochs: its advantages per
  # chunk read every stored step's rebuilt stack of frames. (ppo_joint_boxing
  # differs in its env and two coefficients; tests/test_configs.py parses it.)
  config = os.path.join(ROOT, 'configs', 'ppo_joint_pong.gin')
  assert_resume_is_exact(tmp_path, config, [
      'RLTask.n_envs = 2', 'train_rl.checkpoint_every = 1',
      'AtariCnnBody.hidden_sizes = (2, 2, 2)', 'AtariCnnBody.output_size = 8',
      'PPOJoint.n_interactions_per_epoch = 32', 'PPOJoint.train_steps_per_epoch = 2',
      'PPOJoint.batch_size = 4', 'PPOJoint.n_eval_episodes = 0'], 2)
