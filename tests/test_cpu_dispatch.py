"""rl.cpu_dispatch: runs on host envs compute inline, JAX-native runs asynchronously.

Each check runs in a fresh process: the CPU client reads the setting when the
process first computes, and this test process has computed long before.
"""
import subprocess
import sys

from run_helpers import REINFORCE
from run_helpers import ROOT

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


def python(code, *args):
  result = subprocess.run([sys.executable, '-c', LONG + code, *args], cwd=ROOT,
                          capture_output=True, text=True, timeout=300)
  assert result.returncode == 0, result.stderr
  return result.stdout.split()


def test_the_choice_holds_from_the_first_computation_on():
  out = python("""
from rl import cpu_dispatch
cpu_dispatch.choose(inline=True)
print(long_result().is_ready())
# The client exists now: a later choice changes nothing.
cpu_dispatch.choose(inline=False)
print(long_result().is_ready())
""")
  assert out == ['True', 'True']


def test_without_a_choice_computations_are_asynchronous():
  assert python('print(long_result().is_ready())') == ['False']


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


def test_a_jax_native_run_keeps_asynchronous_dispatch(tmp_path):
  # Its next epoch is dispatched before the current one's metrics are read.
  out = python(RUN, f'{ROOT}/configs/ppo_cartpole_jax.gin', str(tmp_path / 'run'),
               'train_rl.n_epochs = 0')
  assert out[-1] == 'False'  # after the run's own line


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
