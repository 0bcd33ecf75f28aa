"""JAX's persistent compilation cache: where rl.run and rl.evaluate put it, and turning it off.

Every run here caches in the test's own temporary folders: HOME and
XDG_CACHE_HOME point into tmp_path too, so the default folder is a temporary
one as well, never the user's ~/.cache.
"""
import os
import subprocess
import sys

import pytest

from launch import processes
from launch import runner
from rl import compilation_cache
from run_helpers import REINFORCE
from run_helpers import ROOT
from run_helpers import TINY

# One epoch: enough to compile the model's init, acting and training steps.
ONE_EPOCH = [b for b in TINY if not b.startswith('train_rl.n_epochs')] + ['train_rl.n_epochs = 1']
# No epoch: building the trainer still compiles (the model's init), which is
# all that the tests of where the cache goes need.
NO_EPOCH = ONE_EPOCH[:-1] + ['train_rl.n_epochs = 0']


def cache_files(folder):
  """The files under `folder` (none if it does not exist)."""
  return sorted(os.path.relpath(os.path.join(d, f), folder)
                for d, _, files in os.walk(folder) for f in files)


@pytest.fixture
def env(tmp_path):
  """This environment with HOME and XDG_CACHE_HOME in tmp_path and no cache setting."""
  environ = dict(os.environ, HOME=str(tmp_path / 'home'), XDG_CACHE_HOME=str(tmp_path / 'xdg'))
  environ.pop(compilation_cache.ENV_VAR, None)
  environ.pop('JAX_COMPILATION_CACHE_DIR', None)
  return environ


def run(environ, output_dir, *flags, module='rl.run', bindings=NO_EPOCH):
  args = [f'--output_dir={output_dir}', *flags]
  if module == 'rl.run':
    args = [f'--config_file={REINFORCE}', *[f'--config={b}' for b in bindings], *args]
  result = subprocess.run([sys.executable, '-m', module, *args], cwd=ROOT, env=environ,
                          capture_output=True, text=True, timeout=300)
  assert result.returncode == 0, result.stderr
  return result


# -- where: flag, environment variable, default ------------------------------------------


def test_default_folder_is_per_user_and_honours_xdg_cache_home(tmp_path):
  home = os.path.expanduser('~')
  assert compilation_cache.resolve(None, {}) == os.path.join(
      home, '.cache', 'rl', 'jax_compilation_cache')
  assert compilation_cache.resolve(None, {'XDG_CACHE_HOME': ''}) == os.path.join(
      home, '.cache', 'rl', 'jax_compilation_cache')
  assert compilation_cache.resolve(None, {'XDG_CACHE_HOME': str(tmp_path)}) == str(
      tmp_path / 'rl' / 'jax_compilation_cache')


def test_flag_beats_environment_variable_and_both_turn_it_off(tmp_path):
  environ = {compilation_cache.ENV_VAR: str(tmp_path / 'env'), 'XDG_CACHE_HOME': str(tmp_path)}
  assert compilation_cache.resolve(None, environ) == str(tmp_path / 'env')
  assert compilation_cache.resolve(str(tmp_path / 'flag'), environ) == str(tmp_path / 'flag')
  for off in ('', 'off', 'OFF', ' off ', 'none', 'None'):
    assert compilation_cache.resolve(off, environ) is None
    assert compilation_cache.resolve(None, {compilation_cache.ENV_VAR: off}) is None
  # A relative folder is made absolute (runs of a sweep start elsewhere).
  assert compilation_cache.resolve('cache', {}) == os.path.abspath('cache')


def test_the_test_suite_never_caches_in_the_users_folder():
  """conftest points every process the tests start at a temporary folder."""
  folder = compilation_cache.resolve()
  assert folder is not None
  assert not folder.startswith(os.path.join(os.path.expanduser('~'), '.cache'))


# -- real runs -----------------------------------------------------------------------------


def test_default_run_caches_in_xdg_folder_and_a_rerun_compiles_nothing_new(tmp_path, env):
  """A second identical run finds every program it compiles in the cache: no new entries."""
  folder = tmp_path / 'xdg' / 'rl' / 'jax_compilation_cache'
  timing = tmp_path / 'timing.txt'
  run(dict(env, RL_TIMING_FILE=str(timing)), tmp_path / 'a', bindings=ONE_EPOCH)
  first = cache_files(folder)
  assert first, 'the run cached nothing'
  assert not os.path.exists(tmp_path / 'home' / '.cache')
  run(env, tmp_path / 'b', bindings=ONE_EPOCH)
  assert cache_files(folder) == first
  # The benchmark's timing marks: in order, one each.
  events = [line.split()[0] for line in timing.read_text().splitlines()]
  assert events == ['main', 'first_epoch_start', 'first_epoch_end']
  stamps = [float(line.split()[1]) for line in timing.read_text().splitlines()]
  assert stamps == sorted(stamps)


def test_flag_and_environment_variable_move_the_cache(tmp_path, env):
  env_dir, flag_dir = tmp_path / 'env_cache', tmp_path / 'flag_cache'
  environ = dict(env, RL_COMPILATION_CACHE_DIR=str(env_dir))
  run(environ, tmp_path / 'a', f'--compilation_cache_dir={flag_dir}')
  assert cache_files(flag_dir)
  assert not cache_files(env_dir) and not cache_files(tmp_path / 'xdg')
  run(environ, tmp_path / 'b')
  assert cache_files(env_dir)
  assert not cache_files(tmp_path / 'xdg')


@pytest.mark.parametrize('how', ['flag', 'env'])
def test_cache_turned_off_writes_no_cache_anywhere(tmp_path, env, how):
  env_dir = tmp_path / 'env_cache'
  if how == 'flag':  # an empty flag wins over the environment variable
    run(dict(env, RL_COMPILATION_CACHE_DIR=str(env_dir)), tmp_path / 'a',
        '--compilation_cache_dir=')
  else:
    run(dict(env, RL_COMPILATION_CACHE_DIR='off'), tmp_path / 'a')
  assert not cache_files(env_dir)
  assert not os.path.exists(tmp_path / 'xdg') and not os.path.exists(tmp_path / 'home')


def test_unwritable_cache_folder_warns_once_and_the_run_goes_on(tmp_path, env):
  blocker = tmp_path / 'a_file'
  blocker.write_text('')
  result = run(env, tmp_path / 'a', f'--compilation_cache_dir={blocker / "cache"}')
  lines = result.stderr.strip().splitlines()
  assert len(lines) == 1 and lines[0].startswith('rl.run: warning:'), result.stderr
  assert 'not writable' in lines[0] and 'running without it' in lines[0]
  assert not os.path.exists(tmp_path / 'xdg')


def test_evaluate_uses_the_same_cache(tmp_path, env, finished_run):
  folder = tmp_path / 'eval_cache'
  run(env, finished_run, f'--compilation_cache_dir={folder}', module='rl.evaluate')
  assert cache_files(folder)
  run(dict(env, RL_COMPILATION_CACHE_DIR='off'), finished_run, module='rl.evaluate')
  assert not os.path.exists(tmp_path / 'xdg')


def test_sweep_passes_its_flag_to_every_run(tmp_path):
  spec = {'folder': 'g/seed_0', 'seed': 0, 'bindings': {}}
  for given, passed in ((None, None), ('', ''), ('off', 'off'),
                        ('cache', os.path.abspath('cache'))):
    job = runner.job(spec, [REINFORCE], [], str(tmp_path), compilation_cache_dir=given)
    assert job['compilation_cache_dir'] == passed
    command = processes.rl_run_command(job['config_files'], job['output_dir'], job['seed'],
                                       job['bindings'], False, job['compilation_cache_dir'])
    flags = [a for a in command if a.startswith('--compilation_cache_dir')]
    assert flags == ([] if passed is None else [f'--compilation_cache_dir={passed}'])


def test_nothing_is_cached_or_compiled_at_import():
  """rl.run's imports compute nothing (the cache is set up after them, in main).

  A computation would create JAX's CPU client, after which the dispatch chosen
  by rl.cpu_client does not take effect: a long computation made after the
  choice of inline dispatch is done when its call returns only if nothing ran
  before it.
  """
  code = ('import rl.run, rl.evaluate, sys; from rl import cpu_client; '
          'cpu_client.choose_dispatch(inline=True); import jax, jax.numpy as jnp; '
          'f = jax.jit(lambda x: jax.lax.fori_loop(0, 100, lambda i, y: jnp.tanh(y @ y), x)); '
          'x = jnp.full((256, 256), 1e-3); f(x).block_until_ready(); print(f(x).is_ready()); '
          "print(sorted(m for m in ('orbax', 'tensorboardX', 'matplotlib', 'ray', 'moviepy', "
          "'launch', 'rl.report') if m in sys.modules))")
  result = subprocess.run([sys.executable, '-c', code], cwd=ROOT, capture_output=True,
                          text=True, timeout=120)
  assert result.returncode == 0, result.stderr
  assert result.stdout.split('\n', 1) == ['True', '[]\n']
