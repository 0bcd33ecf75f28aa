"""RLTask.normalize_rewards: training rewards scaled by their discounted return's running std."""
import numpy as np
import pytest

from rl.envs.task import RLTask
from rl.errors import ConfigError
from task_helpers import built_task

ENV = 'Pendulum-v1'
GAMMA = 0.9


def random_actions(task, seed):
  rng = np.random.default_rng(seed)
  low, high = task.action_space.low, task.action_space.high

  def policy(obs):
    n = obs.shape[0]
    return rng.uniform(low, high, (n,) + low.shape).astype(np.float32), np.zeros((n, 2),
                                                                                 np.float32)
  return policy


def pendulum(normalize, n_envs=2):
  return built_task(env=ENV, n_envs=n_envs, gamma=GAMMA, normalize_rewards=normalize, seed=4,
                    dist_inputs_size=2)


def stored_rewards(task, epoch):
  return task.epochs[epoch].rows['reward']


def expected_scaled(raw, gamma, epsilon=1e-8):
  """Each reward over the running std of the discounted return so far (one env, no episode end)."""
  returns, out, discounted = [], [], 0.0
  for reward in raw:
    discounted = discounted * gamma + reward
    returns.append(discounted)
    out.append(reward / np.sqrt(np.var(returns) + epsilon))
  return np.array(out)


def test_stored_rewards_are_scaled_and_logged_returns_are_the_envs():
  plain, scaled = pendulum(False, n_envs=1), pendulum(True, n_envs=1)
  stats = [t.collect(random_actions(t, 0), n_interactions=400) for t in (plain, scaled)]
  raw = stored_rewards(plain, 1)
  mask = plain.epochs[1].rows['mask'] > 0
  # Pendulum's 200-step episodes: two episodes, each stored with its bootstrap row.
  first = raw[mask][:200]
  got = stored_rewards(scaled, 1)[mask][:200]
  # gymnasium's RunningMeanStd starts from a prior count of 1e-4 at variance 1.
  np.testing.assert_allclose(got[5:], expected_scaled(first, GAMMA)[5:], rtol=2e-3)
  # The logged returns are the env's own, not the scaled ones.
  assert stats[1]['episode_returns'] == pytest.approx(stats[0]['episode_returns'])
  assert len(stats[1]['episode_returns']) == 2
  # Evaluation plays the env's own rewards.
  evals = [t.evaluate(random_actions(t, 1), 1, reset_seed=7) for t in (plain, scaled)]
  assert evals[1] == pytest.approx(evals[0])
  plain.close()
  scaled.close()


def test_the_running_statistics_resume_with_the_checkpoint():
  task = pendulum(True)
  task.collect(random_actions(task, 0), n_interactions=300)
  arrays, meta = task.state_dict()
  resumed = pendulum(True)
  resumed.load_state_dict(arrays, meta)
  rows = []
  for t in (task, resumed):
    t.collect(random_actions(t, 1), n_interactions=300, epoch_id=2)
    rows.append(stored_rewards(t, 2))
    t.close()
  np.testing.assert_array_equal(rows[1], rows[0])


def test_refused_on_jax_native_envs_in_one_line():
  with pytest.raises(ConfigError) as info:
    RLTask(env='gymnax:CartPole-v1', normalize_rewards=True)
  assert 'RLTask.normalize_rewards = True is not supported on JAX-native envs' in (
      str(info.value).splitlines()[0])
