"""rl.cpu_client: runs on host envs compute inline, JAX-native runs asynchronously; XLA
computes on the cores the config leaves it.

Each check runs in a fresh process: the CPU client reads the settings when the
process first computes, and this test process has computed long before.
"""
import os
import subprocess
import sys

import pytest

from run_helpers import REINFORCE
from run_helpers import ROOT

from rl import cpu_client
from rl.errors import ConfigError

# A computation long enough that, dispatched asynchronously, it is still
# running when the call returns; inline, the call returns with it done.
LONG = """
import jax, jax.numpy as jnp
def long_result():
  f = jax.jit(lambda x: jax.lax.fori_loop(0, 100, lambda i, y: jnp.tanh(y @ y), x))
  x = jnp.full((256, 256), 1e-3)
  f(x).block_until_ready()  # compiled before the call that is looked at
  return f(x)
"""


# The number of threads of XLA's CPU pool (Linux names them so) and whether
# PJRT_NPROC is left in the process's environment.
THREADS = """
def xla_threads():
  names = []
  for t in os.listdir('/proc/self/task'):
    try:
      names.append(open(f'/proc/self/task/{t}/comm').read())
    except FileNotFoundError:  # a thread that ended since the listing
      pass
  return sum('XLAEigen' in n for n in names)
def report():
  print(xla_threads(), os.environ.get('PJRT_NPROC', '-'))
"""


def python(code, *args, env=None):
  environ = {k: v for k, v in os.environ.items() if k != cpu_client.THREADS_ENV}
  result = subprocess.run([sys.executable, '-c', 'import os\n' + LONG + THREADS + code, *args],
                          cwd=ROOT, capture_output=True, text=True, timeout=300,
                          env={**environ, **(env or {})})
  assert result.returncode == 0, result.stderr
  return result.stdout.split()


def test_the_choice_holds_from_the_first_computation_on():
  out = python("""
from rl import cpu_client
cpu_client.choose_dispatch(inline=True)
print(long_result().is_ready())
# The client exists now: a later choice changes nothing.
cpu_client.choose_dispatch(inline=False)
print(long_result().is_ready())
""")
  assert out == ['True', 'True']


# Prepares a run (its config, task and trainer), then reports whether a
# computation made after it ran inline.
RUN = """
import sys
from rl import experiment
with experiment.prepared_run([sys.argv[1]], sys.argv[3:], sys.argv[2]):
  print(long_result().is_ready())
"""


def test_a_gymnasium_run_computes_inline(tmp_path):
  out = python(RUN, REINFORCE, str(tmp_path / 'run'), 'train_rl.n_epochs = 0', 'RLTask.n_envs = 2')
  assert out[-1] == 'True'  # after the run's own line


def test_threads_are_the_cores_but_those_left_to_the_host():
  assert cpu_client.threads_for(1, 2) == 1
  assert cpu_client.threads_for(1, 16) == 15
  assert cpu_client.threads_for(0, 2) == 2
  assert cpu_client.threads_for(1, 1) == 1  # never none
  assert cpu_client.threads_for(3, 2) == 1
  with pytest.raises(ConfigError, match='host_cores'):
    cpu_client.threads_for(-1, 2)


needs_proc = pytest.mark.skipif(not os.path.isdir('/proc/self/task'),
                                reason="XLA's threads are counted in /proc")


@needs_proc
@pytest.mark.parametrize('host_cores', [0, 1])
def test_xla_gets_the_threads_chosen_and_the_environment_is_left_as_it_was(host_cores):
  out = python(f"""
from rl import cpu_client
print(cpu_client.choose_threads({host_cores}))
report()
""")
  expected = cpu_client.threads_for(host_cores, cpu_client.available_cores())
  assert out == [str(expected), str(expected), '-']


@needs_proc
def test_a_pjrt_nproc_of_the_users_stands_and_without_a_choice_computations_are_asynchronous():
  # One process checks both: choosing threads is no choice of dispatch.
  out = python("""
from rl import cpu_client
print(cpu_client.choose_threads(1))
print(long_result().is_ready())
report()
""", env={cpu_client.THREADS_ENV: '3'})
  assert out == ['None', 'False', '3', '3']


# Prepares a run, then reports whether a computation made after it ran inline,
# and XLA's threads.
RUN_THREADS = """
import sys
from rl import experiment
with experiment.prepared_run([sys.argv[1]], sys.argv[3:], sys.argv[2]):
  print(long_result().is_ready())
  report()
"""


@needs_proc
@pytest.mark.parametrize('host_cores', [0, 1])
def test_a_jax_native_run_gives_xla_the_cores_its_config_leaves_and_stays_asynchronous(
    tmp_path, host_cores):
  # Asynchronous: its next epoch is dispatched before the current one's metrics are read.
  out = python(RUN_THREADS, f'{ROOT}/configs/ppo_cartpole_jax.gin', str(tmp_path / 'run'),
               'train_rl.n_epochs = 0', f'cpu_threads.host_cores = {host_cores}')
  expected = cpu_client.threads_for(host_cores, cpu_client.available_cores())
  assert out[-3:] == ['False', str(expected), '-']


def test_the_env_is_read_from_the_parsed_config_macros_included():
  import gin  # pylint: disable=import-outside-toplevel
  from rl import config  # pylint: disable=import-outside-toplevel
  from rl import experiment  # pylint: disable=import-outside-toplevel,unused-import  (RLTask)
  try:
    for bindings, env in ((["RLTask.env = 'CartPole-v1'"], 'CartPole-v1'),
                          (["ENV = 'gymnax:CartPole-v1'", 'RLTask.env = %ENV'],
                           'gymnax:CartPole-v1'),
                          (['RLTask.n_envs = 2'], None)):
      gin.clear_config()
      config.parse_config([], bindings)
      assert config.configured_env() == env
  finally:
    gin.clear_config()
