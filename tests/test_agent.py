"""rl.agent: a run's policy from Python acts as the run's evaluation does, on both backends.

Greedy actions played on the eval envs, reset as the run's evaluation resets
them, give exactly the returns the run logged; sampling is reproducible;
loading writes nothing; a folder that is no finished run is one line.
"""
import os
import re
import shutil

import jax
import numpy as np
import pytest

from rl import experiment
from rl import keys
from rl.agent import load
from rl.envs import gymnax_envs
from rl.errors import ConfigError
from rl.errors import OutputDirError
from rl.metrics import read_metrics
from run_helpers import ROOT
from run_helpers import snapshot

PPO_JAX = os.path.join(ROOT, 'configs', 'ppo_cartpole_jax.gin')
DQN = os.path.join(ROOT, 'configs', 'dqn_cartpole.gin')
TRANSFORMER = os.path.join(ROOT, 'configs', 'ppo_cartpole_transformer.gin')
EVAL_EPISODES = 3
TINY_PPO = ['train_rl.n_epochs = 2', 'train_rl.checkpoint_every = 1', 'RLTask.n_envs = 4',
            'MLP.layer_widths = (8,)', 'PPO.n_interactions_per_epoch = 32',
            'PPO.value_train_steps_per_epoch = 2', 'PPO.policy_train_steps_per_epoch = 2',
            'PPO.value_batch_size = 16', 'PPO.policy_batch_size = 16', 'PPO.eval_every = 1',
            f'PPO.n_eval_episodes = {EVAL_EPISODES}']
TINY_DQN = ['train_rl.n_epochs = 2', 'train_rl.checkpoint_every = 1', 'RLTask.n_envs = 2',
            'RLTask.initial_trajectories = 2', 'MLP.layer_widths = (8,)',
            'DQN.n_interactions_per_epoch = 16', 'DQN.value_train_steps_per_epoch = 3',
            'DQN.value_batch_size = 8', 'DQN.eval_every = 1', 'DQN.max_slice_length = 3',
            f'DQN.n_eval_episodes = {EVAL_EPISODES}']


def trained(tmp_path_factory, config, bindings):
  """The folder of a finished run of `config` with `bindings`."""
  out = str(tmp_path_factory.mktemp('agent') / 'run')
  experiment.execute([config], bindings, out)
  return out


@pytest.fixture(scope='module')
def jax_run(tmp_path_factory):
  return trained(tmp_path_factory, PPO_JAX, TINY_PPO)


@pytest.fixture(scope='module')
def dqn_run(tmp_path_factory):
  return trained(tmp_path_factory, DQN, TINY_DQN)


def logged_eval(folder, epoch):
  return next(row['eval_return'] for row in read_metrics(folder) if row['epoch'] == epoch)


def greedy_gym_returns(agent, n_episodes):
  """Greedy returns on the vector env the run evaluates on, reset with its evaluation's seed."""
  env = agent.make_env(n_envs=n_episodes)
  try:
    obs, _ = env.reset(seed=agent.learner.eval_seed(agent.epoch))
    returns, running = np.zeros(n_episodes), np.ones(n_episodes, bool)
    while running.any():
      obs, reward, terminated, truncated, _ = env.step(agent.act(obs))
      returns += np.where(running, reward, 0.0)
      running &= ~(terminated | truncated)
  finally:
    env.close()
  return returns


def greedy_gymnax_returns(agent, n_episodes):
  """The same on a JAX-native run's gymnax env, reset from its evaluation's key."""
  env, params = agent.make_env()
  carry = gymnax_envs.reset(env, params, keys.seed_key(agent.learner.eval_seed(agent.epoch)),
                            n_episodes, agent.observation_space.dtype)
  obs, state = carry.obs, carry.state
  # Jitted: one compile, where the env's step run op by op compiles each of its ops.
  step = jax.jit(jax.vmap(env.step, in_axes=(0, 0, 0, None)))
  key = jax.random.key(0)  # CartPole's steps draw nothing
  returns, running = np.zeros(n_episodes), np.ones(n_episodes, bool)
  while running.any():
    key, step_key = jax.random.split(key)
    obs, state, reward, terminated, truncated, _ = step(
        jax.random.split(step_key, n_episodes), state, agent.act(obs), params)
    returns += np.where(running, np.asarray(reward), 0.0)
    running &= ~np.asarray(terminated | truncated)
  return returns


def test_greedy_actions_replay_the_logged_eval_on_gymnasium(finished_run):
  before = snapshot(finished_run)
  with load(finished_run) as agent:
    assert agent.epoch == 3 and not agent.jax_native and agent.env_id == 'CartPole-v1'
    returns = greedy_gym_returns(agent, 2)
    # Same checkpoint, seeds and actions: exactly the logged mean.
    assert returns.mean() == logged_eval(finished_run, 3)
    assert returns.tolist() == agent.learner.episode_returns(0.0).tolist()
  # An older checkpoint the folder keeps replays its own epoch's eval.
  with load(finished_run, epoch=2) as agent:
    assert agent.epoch == 2
    assert greedy_gym_returns(agent, 2).mean() == logged_eval(finished_run, 2)
  # Nothing written: no lock, no metrics, no checkpoint change.
  assert snapshot(finished_run) == before


def test_one_observation_or_a_batch(finished_run):
  with load(finished_run) as agent:
    env = agent.make_env()
    obs, _ = env.reset(seed=0)
    batch = np.stack([obs, obs * 0.5, -obs, obs + 0.1])
    actions = agent.act(batch)
    assert actions.shape == (4,) and agent.action_space.contains(int(actions[0]))
    assert agent.act(obs).shape == ()
    assert [int(agent.act(row)) for row in batch] == actions.tolist()
    assert agent.act(obs.tolist()) == agent.act(obs)  # nested lists work as arrays
    # One env with the eval wrappers steps on act's action.
    assert env.step(agent.act(obs))[0].shape == agent.observation_space.shape
    env.close()


def test_sampling_at_a_fixed_seed_is_reproducible(finished_run):
  with load(finished_run) as agent:
    obs = np.zeros((256,) + agent.observation_space.shape, np.float32)
    first = agent.act(obs, temperature=1.0, seed=7)
    assert np.array_equal(agent.act(obs, temperature=1.0, seed=7), first)
    assert np.array_equal(agent.act(obs, temperature=1.0, seed=jax.random.key(7)), first)
    assert not np.array_equal(agent.act(obs, temperature=1.0, seed=8), first)
    assert set(first.tolist()) == {0, 1}  # really sampled: both actions among 256 draws
    # Without a seed, the agent's own key: each call draws anew, from load's seed.
    stream = [agent.act(obs, temperature=1.0) for _ in range(2)]
    assert not np.array_equal(stream[0], stream[1])
  with load(finished_run) as again:
    assert all(np.array_equal(again.act(obs, temperature=1.0), s) for s in stream)
  with load(finished_run, seed=1) as other:
    assert not np.array_equal(other.act(obs, temperature=1.0), stream[0])


def test_greedy_actions_replay_the_logged_eval_on_gymnax(jax_run):
  before = snapshot(jax_run)
  with load(jax_run) as agent:
    assert agent.jax_native and agent.epoch == 2
    returns = greedy_gymnax_returns(agent, EVAL_EPISODES)
    assert returns.mean() == logged_eval(jax_run, 2)
    assert returns.tolist() == agent.learner.episode_returns(0.0).tolist()
    obs = np.zeros((16,) + agent.observation_space.shape, np.float32)
    assert np.array_equal(agent.act(obs, temperature=1.0, seed=3),
                          agent.act(obs, temperature=1.0, seed=3))
    with pytest.raises(ConfigError, match='JAX-native env: make_env'):
      agent.make_env(n_envs=2)
  assert snapshot(jax_run) == before


def test_dqn_acts_by_argmax_q(dqn_run):
  with load(dqn_run) as agent:
    assert agent.epoch == 2
    assert greedy_gym_returns(agent, EVAL_EPISODES).mean() == logged_eval(dqn_run, 2)
    obs = np.random.default_rng(0).normal(size=(32,) + agent.observation_space.shape)
    learner = agent.learner
    network = learner.networks[learner.acting_name]
    variables = {'params': network.variables['params'], **learner.acting.model_state}
    # Jitted: one compile, where the network applied op by op compiles each of its ops.
    q_values = np.asarray(jax.jit(network.model.apply)(variables,
                                                       obs.astype(np.float32)[:, None]))
    assert agent.act(obs).tolist() == q_values[:, -1].argmax(-1).tolist()
    # Epsilon-greedy above temperature 0, reproducibly.
    assert np.array_equal(agent.act(obs, 1.0, seed=2), agent.act(obs, 1.0, seed=2))


def test_a_sequence_policy_acts_on_the_windows_its_env_gives(tmp_path_factory):
  bindings = [*TINY_PPO, 'train_rl.n_epochs = 1', 'RLTask.context_length = 4',
              'TransformerDecoder.d_model = 8', 'TransformerDecoder.d_ff = 16',
              'TransformerDecoder.n_heads = 2', 'TransformerDecoder.n_layers = 1']
  folder = trained(tmp_path_factory, TRANSFORMER, bindings)
  with load(folder) as agent:
    assert agent.observation_space.shape == (4, 5)  # 4 steps of CartPole's 4 and a real-step flag
    assert greedy_gym_returns(agent, EVAL_EPISODES).mean() == logged_eval(folder, 1)
    env = agent.make_env()
    obs, _ = env.reset(seed=0)
    assert obs.shape == (4, 5) and agent.act(obs).shape == ()
    env.close()


def test_the_docs_example_runs(finished_run, tmp_path, monkeypatch, capsys):
  with open(os.path.join(ROOT, 'docs', 'agent.md'), encoding='utf-8') as f:
    blocks = re.findall(r'```python\n(.*?)```', f.read(), re.S)
  monkeypatch.chdir(tmp_path)
  os.makedirs('runs')
  shutil.copytree(finished_run, 'runs/ppo_cartpole')
  exec(compile(blocks[0], 'docs/agent.md', 'exec'), {})  # pylint: disable=exec-used
  assert re.fullmatch(r'epoch 3: return \d+\.0\n', capsys.readouterr().out)


def test_the_docs_gymnax_example_runs(jax_run, tmp_path, monkeypatch):
  with open(os.path.join(ROOT, 'docs', 'agent.md'), encoding='utf-8') as f:
    blocks = re.findall(r'```python\n(.*?)```', f.read(), re.S)
  monkeypatch.chdir(tmp_path)
  os.makedirs('runs')
  shutil.copytree(jax_run, 'runs/ppo_cartpole_jax')
  namespace = {}
  exec(compile(blocks[1], 'docs/agent.md', 'exec'), namespace)  # pylint: disable=exec-used
  assert namespace['episode_return'] >= 1  # CartPole pays 1 a step


def test_a_folder_that_is_no_finished_run_is_one_line(tmp_path, finished_run):
  with pytest.raises(OutputDirError, match='does not exist'):
    load(str(tmp_path / 'nothing'))
  (tmp_path / 'config.gin').write_text('RLTask.seed = 0\n')
  with pytest.raises(OutputDirError, match='no readable checkpoint; train the run first'):
    load(str(tmp_path))
  assert sorted(os.listdir(tmp_path)) == ['config.gin']
  seeds = tmp_path / 'seeds'
  for seed in (0, 1):
    (seeds / f'seed_{seed}').mkdir(parents=True)
    (seeds / f'seed_{seed}' / 'config.gin').write_text('RLTask.seed = 0\n')
  with pytest.raises(OutputDirError) as raised:
    load(str(seeds))
  assert str(raised.value) == (f"'{seeds}' holds the runs of --seeds=0-1, a folder each; load "
                               f"one of them, e.g. load('{seeds / 'seed_0'}').")
  with pytest.raises(OutputDirError) as raised:
    load(finished_run, epoch=9)
  assert str(raised.value) == (f"'{finished_run}' has no checkpoint of epoch 9 (it keeps the "
                               'epochs 1, 2, 3); pass one of them, or None for the newest.')


def test_bad_observations_and_temperatures_are_one_line(finished_run):
  with load(finished_run) as agent:
    with pytest.raises(ConfigError) as raised:
      agent.act(np.zeros((2, 5)))
    assert str(raised.value) == ('an observation of shape (2, 5) does not fit CartPole-v1, '
                                 'whose observations are (4,): pass one of them or a batch '
                                 '[B, 4].')
    with pytest.raises(ConfigError, match='temperature must be >= 0'):
      agent.act(np.zeros(4), temperature=-1.0)
