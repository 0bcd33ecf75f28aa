"""The Atari preprocessing and frame stacking of rl.envs.wrappers, through RLTask on real ALE games.

A few hundred agent steps each: Asterix under the cycling policy below scores
more than 1 point per reward within 10 steps, loses its first life near step
110 and ends its game near step 250, so clipping, life loss and a whole game
all happen quickly. The games and their seeds are fixed, so the numbers are too.
"""
import gin
import gymnasium as gym
import numpy as np
import pytest

from rl.data import slices
from rl.envs import wrappers
from rl.errors import ConfigError
from rl.envs.task import RLTask
from task_helpers import built_task

ASTERIX_STEPS = 1000  # past the end of the first game


def cycling_policy(n_actions, start=0):
  """Action (t // 2) % n_actions at step t >= start in every env: the same on every run."""
  step = [start]

  def policy(obs):
    n = obs.shape[0]
    action = (step[0] // 2) % n_actions
    step[0] += 1
    return np.full(n, action, np.int64), np.zeros((n, 1), np.float32)
  return policy


def atari_task(env='ALE/Asterix-v5', n_envs=1, **bindings):
  for name, value in bindings.items():
    gin.bind_parameter(f'atari_preprocessing.{name}', value)
  return built_task(env=env, n_envs=n_envs, atari_preprocessing=True, num_stacked_frames=4,
                    seed=3)


def trajectories(data):
  for start, rows in zip(data.traj_start, data.traj_rows):
    yield {k: v[start:start + rows] for k, v in data.rows.items()}


@pytest.fixture(scope='module')
def asterix_game():
  """The first game of atari_task()'s env without the training-only wrappers.

  The same seed and actions as the training env of every atari_task(): the
  emulator plays the same game, whatever the training wrappers do with its
  rewards and lives. Returns its rewards and lives per step, up to the step
  that ends it.
  """
  task = atari_task()
  env, _ = task._make_env(1, training=False)  # pylint: disable=protected-access
  policy = cycling_policy(task.action_space.n)
  obs, _ = env.reset(seed=task.seed)
  rewards, lives = [], []
  for _ in range(ASTERIX_STEPS):
    obs, reward, terminated, truncated, info = env.step(policy(obs)[0])
    ended = terminated[0] or truncated[0]
    rewards.append(reward[0])
    lives.append((info['final_info'] if ended else info)['lives'][0])
    if ended:
      break
  env.close()
  task.close()
  assert ended
  return np.array(rewards), np.array(lives)


def test_pong_frames_are_84x84_grayscale_stacked_on_the_channel_axis():
  task = atari_task('ALE/Pong-v5')
  assert task.observation_space.shape == (84, 84, 4)
  assert task.observation_space.dtype == np.uint8
  assert task.frame_observation_space.shape == (84, 84, 1)
  assert task.num_stacked_frames == 4
  task.collect(cycling_policy(task.action_space.n), n_interactions=40)
  # Each row stores its newest frame; the stacks come back when rows are read.
  assert task.epochs[1].rows['observation'].shape == (41, 84, 84, 1)
  obs = np.asarray(slices.observations(task.slice_data()))[:41]
  assert obs.shape == (41, 84, 84, 4) and obs.dtype == np.uint8
  # Each step drops the oldest frame and appends the newest.
  np.testing.assert_array_equal(obs[1:, ..., :3], obs[:-1, ..., 1:])
  # The first observation repeats the reset frame; the game's frames differ later.
  assert all((obs[0, ..., k] == obs[0, ..., 0]).all() for k in range(4))
  assert not (obs[-1, ..., 3] == obs[-1, ..., 0]).all()
  task.close()


def test_training_rewards_are_clipped_and_the_train_return_is_the_whole_game(asterix_game):
  rewards, lives = asterix_game
  task = atari_task(terminal_on_life_loss=True)
  assert rewards.max() > 1 and lives[0] > lives[-1]  # the game's scores need clipping
  stats = task.collect(cycling_policy(task.action_space.n), n_interactions=len(rewards))
  # One game ended: its unclipped score, not the clipped sum nor one life's.
  assert stats['episode_returns'] == [rewards.sum()]
  assert task.n_episodes == 1
  stored = list(trajectories(task.epochs[1]))
  real = [t['mask'] == 1 for t in stored]
  np.testing.assert_array_equal(
      np.concatenate([t['reward'][m] for t, m in zip(stored, real)]), np.clip(rewards, -1, 1))
  # Every lost life ends a training episode (terminated), the game over too.
  lost = np.flatnonzero(np.diff(np.concatenate([[lives[0]], lives])) < 0)
  ends = np.cumsum([m.sum() for m in real]) - 1
  np.testing.assert_array_equal(ends, np.union1d(lost, [len(rewards) - 1]))
  assert all(t['done'][m][-1] == 1 for t, m in zip(stored, real))
  task.close()


def test_eval_envs_play_whole_games_with_unclipped_rewards(asterix_game):
  rewards, _ = asterix_game
  task = atari_task(terminal_on_life_loss=True)
  returns = task.evaluate(cycling_policy(task.action_space.n), 1, reset_seed=task.seed)
  np.testing.assert_array_equal(returns, [rewards.sum()])
  task.close()


def test_resume_from_the_state_dict_continues_the_game_exactly(asterix_game):
  rewards, lives = asterix_game
  # The checkpoint falls after the first lost life, before the game's end.
  split = int(np.argmax(lives < lives[0])) + 5
  task = atari_task(terminal_on_life_loss=True)
  task.collect(cycling_policy(task.action_space.n), n_interactions=split)
  assert task.epochs[1].rows['done'].any() and task.n_episodes == 0
  arrays, meta = task.state_dict()
  assert 'env_state' in arrays  # the ALE env and every wrapper pickle
  # Loaded before the task goes on: the state holds its live buffers.
  resumed = atari_task(terminal_on_life_loss=True)
  resumed.load_state_dict(arrays, meta)
  assert resumed.resume_warning is None
  results = []
  for t in (task, resumed):
    stats = t.collect(cycling_policy(t.action_space.n, split),
                      n_interactions=len(rewards) - split, epoch_id=2)
    results.append((stats['episode_returns'], t.epochs[2].rows))
    t.close()
  (expected_returns, expected), (returns, rows) = results
  assert returns == expected_returns == [rewards.sum()]
  for field in ('observation', 'reward', 'done', 'mask'):
    np.testing.assert_array_equal(rows[field], expected[field])


def sticky_wrapper(task):
  env = task._env.envs[0]  # pylint: disable=protected-access
  while not isinstance(env, gym.wrappers.StickyAction):
    env = env.env
  return env


def test_sticky_actions_are_gymnasiums_wrapper_not_the_ales():
  task = atari_task(env='ALE/Pong-v5')
  assert sticky_wrapper(task).repeat_action_probability == 0.25  # ALE v5's
  assert task._env.envs[0].unwrapped.ale.getFloat('repeat_action_probability') == 0.0  # pylint: disable=protected-access
  task.close()
  own = built_task(env='ALE/Pong-v5', atari_preprocessing=True, seed=0,
                   env_kwargs={'repeat_action_probability': 0.1})
  assert sticky_wrapper(own).repeat_action_probability == pytest.approx(0.1)
  own.close()


@pytest.mark.parametrize('split', [5, 6, 9])
def test_resume_continues_sticky_actions_exactly(split):
  # Up and down in turn keep the paddle mid-field, where a repeated action
  # shows: the checkpoint must carry the action that may be repeated next.
  def up_and_down(start):
    step = [start]

    def policy(obs):
      action = 2 + step[0] % 2
      step[0] += 1
      return np.full(obs.shape[0], action, np.int64), np.zeros((obs.shape[0], 1), np.float32)
    return policy
  task = atari_task(env='ALE/Pong-v5', n_envs=2)
  task.collect(up_and_down(0), n_interactions=2 * split)
  arrays, meta = task.state_dict()
  resumed = atari_task(env='ALE/Pong-v5', n_envs=2)
  resumed.load_state_dict(arrays, meta)
  rows = []
  for t in (task, resumed):
    t.collect(up_and_down(split), n_interactions=40, epoch_id=2)
    rows.append(t.epochs[2].rows['observation'])
    t.close()
  np.testing.assert_array_equal(rows[1], rows[0])


def test_atari_preprocessing_needs_an_ale_env():
  with pytest.raises(ConfigError, match="'CartPole-v1' takes no frameskip"):
    RLTask(env='CartPole-v1', atari_preprocessing=True)


def test_atari_preprocessing_refuses_a_frameskip_of_the_ale():
  with pytest.raises(ConfigError, match='remove frameskip from RLTask.env_kwargs'):
    RLTask(env='ALE/Pong-v5', env_kwargs={'frameskip': 4}, atari_preprocessing=True)


@pytest.mark.parametrize('name, value', [('noop_max', -1), ('frame_skip', 0),
                                         ('screen_size', 8.5)])
def test_bad_atari_preprocessing_options_are_one_line(name, value):
  gin.bind_parameter(f'atari_preprocessing.{name}', value)
  with pytest.raises(ConfigError) as e:
    wrappers.atari_preprocessing()
  # The first line is what rl.run prints (gin appends the configurable's name below).
  assert str(e.value).splitlines()[0] == (
      f'atari_preprocessing.{name} must be an integer >= {int(name != "noop_max")}, '
      f'got {value!r}.')


def test_terminal_on_life_loss_needs_an_env_that_reports_lives():
  env = wrappers.TerminalOnLifeLoss(gym.make('CartPole-v1'))
  with pytest.raises(ConfigError, match="needs an env that reports 'lives'.*'CartPole-v1'"):
    env.reset(seed=0)
