"""RLTask on the optional envs: their extras, namespaces (rl.envs.registry), frame stacking, saved state.

A missing package is simulated in-process: its module is made unimportable
(None in sys.modules, gymnasium's modules that import it dropped from the
cache) or importlib.util.find_spec is made to miss it. The packages are all
installed here (`pip install '.[test]'`), so the tests on real envs run
everywhere.
"""
import importlib.util
import subprocess
import sys

import gymnasium as gym
import numpy as np
import pytest

from rl.envs import env_state
from rl.data import slices
from rl.errors import ConfigError
from rl.envs.task import RLTask
from task_helpers import built_task
from run_helpers import ROOT


def random_policy(task, seed=0):
  rng = np.random.default_rng(seed)
  space = task.action_space

  def policy(obs):
    n = obs.shape[0]
    if isinstance(space, gym.spaces.Discrete):
      actions = rng.integers(0, space.n, size=n)
    else:
      actions = rng.uniform(space.low, space.high, size=(n,) + space.shape).astype(np.float32)
    return actions, np.zeros((n, 1), np.float32)
  return policy


def make_unimportable(monkeypatch, package, *gymnasium_modules):
  """`package` cannot be imported, and the cached modules of gymnasium that import it are gone."""
  monkeypatch.setitem(sys.modules, package, None)
  for name in list(sys.modules):
    if name.startswith(gymnasium_modules):
      monkeypatch.delitem(sys.modules, name)


def assert_one_line(error, *needles):
  """The error's line (what rl.run prints) holds every needle; gin's own notes follow it."""
  first, *rest = str(error.value).splitlines()
  assert all(line.strip().startswith('In call to configurable') for line in rest), rest
  for needle in needles:
    assert needle in first, first


@pytest.mark.parametrize('env_id, package, modules, extra', [
    ('LunarLander-v3', 'Box2D', ('gymnasium.envs.box2d',), 'box2d'),
    ('HalfCheetah-v5', 'mujoco', ('gymnasium.envs.mujoco',), 'mujoco'),
])
def test_an_env_without_its_package_names_our_extra(monkeypatch, env_id, package, modules, extra):
  make_unimportable(monkeypatch, package, *modules)
  with pytest.raises(ConfigError) as e:
    RLTask(env=env_id, n_envs=1)
  assert_one_line(e, f'{env_id!r}', 'not installed', f"install the {extra} extra: "
                  f"pip install '.[{extra}]'.")
  assert 'swig' not in str(e.value) and 'gymnasium[' not in str(e.value)


def test_atari_preprocessing_without_opencv_names_the_atari_extra(monkeypatch):
  make_unimportable(monkeypatch, 'cv2')
  with pytest.raises(ConfigError) as e:
    RLTask(env='ALE/Pong-v5', n_envs=1, atari_preprocessing=True)
  assert_one_line(e, "'ALE/Pong-v5'", 'opencv', "pip install '.[atari]'")


@pytest.mark.parametrize('env_id, module, extra', [
    ('ALE/Pong-v5', 'ale_py', 'atari'),
    ('MinAtar/Breakout-v1', 'minatar', 'minatar'),
])
def test_a_namespace_without_its_package_names_our_extra(monkeypatch, env_id, module, extra):
  namespace = env_id.split('/')[0]
  for key in [k for k, spec in gym.registry.items() if spec.namespace == namespace]:
    monkeypatch.delitem(gym.registry, key)
  find_spec = importlib.util.find_spec
  monkeypatch.setattr(importlib.util, 'find_spec',
                      lambda name, *args: None if name == module else find_spec(name, *args))
  with pytest.raises(ConfigError) as e:
    RLTask(env=env_id, n_envs=1)
  assert_one_line(e, f'{env_id!r}', f'the {extra} extra', 'not installed',
                  f"namespace {namespace!r}", f"pip install '.[{extra}]'.")


def test_the_ale_namespace_is_imported_when_an_env_id_uses_it():
  # A fresh process: nothing has imported ale_py, as in a gin config without imports.
  code = ("import sys; from rl.envs import registry as envs; envs.check_env_id('ALE/Pong-v5'); "
          "print('ale_py' in sys.modules)")
  result = subprocess.run([sys.executable, '-c', code], cwd=ROOT, capture_output=True,
                          text=True, timeout=120, check=False)
  assert result.returncode == 0, result.stderr
  assert result.stdout.split() == ['True']


def test_num_stacked_frames_below_one_is_one_line():
  with pytest.raises(ConfigError) as e:
    RLTask(env='CartPole-v1', num_stacked_frames=0)
  assert_one_line(e, 'RLTask.num_stacked_frames must be an integer >= 1', 'got 0')


def test_stacking_needs_observations_with_an_axis():
  with pytest.raises(ConfigError) as e:
    RLTask(env='FrozenLake-v1', n_envs=1, num_stacked_frames=2)
  assert_one_line(e, "'FrozenLake-v1'", 'Discrete(16)', 'RLTask.num_stacked_frames = 1')


def test_stacked_vector_observations_are_the_last_frames_in_order():
  task = built_task(env='CartPole-v1', n_envs=2, num_stacked_frames=3, seed=1)
  assert task.observation_space.shape == (12,)
  assert task.frame_observation_space.shape == (4,)
  task.collect(random_policy(task), n_interactions=6)
  obs = np.asarray(slices.observations(task.slice_data()))
  first = obs[0]
  np.testing.assert_array_equal(first[:4], first[8:])  # the reset frame, repeated
  np.testing.assert_array_equal(obs[1, :8], obs[0, 4:])  # one frame on, in env 0's segment
  task.close()


def test_minatar_registers_builds_and_collects_through_rltask(monkeypatch):
  # As before anything registered the namespace (MinAtar's registration is a
  # function of minatar.gym; gymnasium 1.x calls no plugins itself).
  for key in [k for k, spec in gym.registry.items() if spec.namespace == 'MinAtar']:
    monkeypatch.delitem(gym.registry, key)
  task = built_task(env='MinAtar/Breakout-v1', n_envs=2, num_stacked_frames=2)
  assert task.observation_space.shape == (10, 10, 8)
  assert task.frame_observation_space.shape == (10, 10, 4)
  stats = task.collect(random_policy(task), n_interactions=20)
  assert stats['env_steps'] == 20
  assert task.epochs[1].rows['observation'].dtype == bool
  assert env_state.dump_env_state(task._env) is not None  # pylint: disable=protected-access
  task.close()


def test_box2d_builds_and_resumes_by_reset():
  task = built_task(env='LunarLander-v3', n_envs=2)
  assert task.observation_space.shape == (8,)
  task.collect(random_policy(task), n_interactions=20)
  # Box2D's world cannot be saved (its pickle is a new env): resumed by a reset.
  arrays, meta = task.state_dict()
  assert 'env_state' not in arrays
  resumed = built_task(env='LunarLander-v3', n_envs=2)
  resumed.load_state_dict(arrays, meta)
  assert 'not bit-exact' in resumed.resume_warning
  task.close()
  resumed.close()


def test_mujoco_builds_and_resumes_exactly():
  def fresh():
    return built_task(env='HalfCheetah-v5', n_envs=2, seed=4)
  task = fresh()
  assert task.observation_space.shape == (17,) and task.action_space.shape == (6,)
  task.collect(random_policy(task), n_interactions=40)
  arrays, meta = task.state_dict()
  assert 'env_state' in arrays
  resumed = fresh()
  resumed.load_state_dict(arrays, meta)
  assert resumed.resume_warning is None
  for t in (task, resumed):
    t.collect(random_policy(t, seed=1), n_interactions=40, epoch_id=2)
  for field in ('observation', 'reward'):
    np.testing.assert_array_equal(task.epochs[2].rows[field], resumed.epochs[2].rows[field])
  task.close()
  resumed.close()
