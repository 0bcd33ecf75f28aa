"""Shared fixtures: a tiny deterministic env with hand-checkable numbers, gin hygiene.

Also keeps the suite out of the user's compilation cache: every `rl.run`,
`rl.evaluate` and `launch.sweep` process the tests start (and any in-process
call of rl.compilation_cache.configure) caches in one temporary folder for the
session, never in ~/.cache. pytest's main process makes the folder before it
starts xdist's workers, which inherit it, so a program compiled by one worker
is read from the cache by the other; the main process removes it at the end.

The suite's programs compile without most of XLA's optimisation passes
(JAX_DISABLE_MOST_OPTIMIZATIONS, in the environment before JAX is imported, so
the processes the tests start inherit it): its models are tiny and its runs
short, so compiling is most of a test's time, and skipping the passes takes a
third to a half of it off the JAX-native tests (tests/README.md); and the
programs the suite compiles itself, outside rl.compiler.jit, use XLA's
elemental CPU emitters, as the runner's programs do by default
(compiler.fast_compile). Every comparison of numbers in the suite is between
programs compiled alike. The
real learning tests and the seed-batch check compile as users' runs do
(`full_optimization`).
"""
import os
import shutil
import tempfile

# Before anything imports JAX, which reads it then.
os.environ['JAX_DISABLE_MOST_OPTIMIZATIONS'] = 'true'
# XLA's elemental CPU emitters for every program not compiled by rl.compiler.jit
# (which names the emitters its config binds): the tests' own jitted and
# op-by-op computations compile in about two thirds of the time.
os.environ['XLA_FLAGS'] = ' '.join(
    [os.environ.get('XLA_FLAGS', ''), '--xla_cpu_use_fusion_emitters=false']).strip()

import gin
import gymnasium as gym
import numpy as np
import pytest

from rl import compilation_cache

# Set at import, before any test module, fixture or child process reads it. An
# xdist worker (PYTEST_XDIST_WORKER set) takes the folder of the main process.
_WORKER = 'PYTEST_XDIST_WORKER' in os.environ
if not (_WORKER and os.environ.get(compilation_cache.ENV_VAR)):
  os.environ[compilation_cache.ENV_VAR] = tempfile.mkdtemp(prefix='rl-test-compilation-cache-')
_COMPILATION_CACHE = os.environ[compilation_cache.ENV_VAR]
# The tests' own programs (compiled in this process) are cached there too: many
# tests build trainers of the same tiny configs, whose programs are then
# compiled once per worker instead of once per test.
compilation_cache.configure(None, 'pytest')


def pytest_unconfigure(config):
  del config
  if not _WORKER:
    shutil.rmtree(_COMPILATION_CACHE, ignore_errors=True)


class ChainEnv(gym.Env):
  """Observation [t], reward t + 1 for the step taken at time t; ends after `length` steps.

  With `terminate=False` the episode never terminates on its own (a TimeLimit
  then truncates it), which exercises truncation versus termination.
  """

  def __init__(self, length=5, terminate=True, n_actions=2):
    self.observation_space = gym.spaces.Box(-1e6, 1e6, (1,), np.float32)
    self.action_space = gym.spaces.Discrete(n_actions)
    self._length = length
    self._terminate = terminate
    self._t = 0

  def reset(self, *, seed=None, options=None):
    super().reset(seed=seed)
    self._t = 0
    return np.array([0.0], np.float32), {}

  def step(self, action):
    reward = float(self._t + 1)
    self._t += 1
    terminated = self._terminate and self._t >= self._length
    return np.array([float(self._t)], np.float32), reward, terminated, False, {}


if 'rl_test/Chain-v0' not in gym.registry:
  gym.register('rl_test/Chain-v0', entry_point=ChainEnv)


@pytest.fixture(autouse=True)
def clean_gin():
  gin.clear_config()
  yield
  gin.clear_config()


class TupleActionEnv(ChainEnv):
  """A Chain env whose action space no trainer handles (a Tuple)."""

  def __init__(self):
    super().__init__()
    self.action_space = gym.spaces.Tuple((gym.spaces.Discrete(2), gym.spaces.Discrete(3)))


if 'rl_test/TupleAction-v0' not in gym.registry:
  gym.register('rl_test/TupleAction-v0', entry_point=TupleActionEnv)


@pytest.fixture(name='full_optimization')
def full_optimization_fixture():
  """XLA with all its optimisation passes for one test, as a user's run compiles."""
  from run_helpers import full_optimization  # pylint: disable=import-outside-toplevel
  with full_optimization():
    yield


@pytest.fixture(scope='session')
def tiny_reference_run(tmp_path_factory):
  """The finished tiny REINFORCE run (run_helpers.TINY), made once per worker: read it only."""
  from rl import experiment as run_lib  # pylint: disable=import-outside-toplevel
  from run_helpers import REINFORCE, TINY  # pylint: disable=import-outside-toplevel
  out = str(tmp_path_factory.mktemp('reference') / 'tiny')
  run_lib.execute([REINFORCE], TINY, out)
  return out


@pytest.fixture(scope='module')
def finished_run(tiny_reference_run, tmp_path_factory):
  """A copy of the tiny reference run for one test module, whose tests may extend it."""
  out = str(tmp_path_factory.mktemp('runs') / 'tiny')
  shutil.copytree(tiny_reference_run, out)
  return out
