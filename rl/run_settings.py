"""What a run's config sets in the process before anything compiles: the parsed gin config,
the kernels every program compiles to (rl.compiler) and the CPU client (rl.cpu_client)."""
import gin

from rl import compiler
from rl import config
from rl import cpu_client
from rl.envs import gymnax_envs as jax_envs


def configure(config_files, bindings, seed=None):
  """Parses the config and sets up what every program of the run compiles and runs with."""
  gin.clear_config()
  bindings = list(bindings)
  if seed is not None:
    bindings.append(f'RLTask.seed = {int(seed)}')
  config.parse_config(config_files, bindings)
  jax_native = configure_compiler()
  # Before the process's first computation: runs on host envs read each policy
  # call at once, so they dispatch inline; XLA gets `cpu_threads.host_cores`' cores.
  cpu_client.configure(inline=not jax_native,
                       host_cores=config.construct(cpu_client.host_cores_setting))


def configure_compiler(meta=None):
  """Sets which kernels every program of the run compiles to from the parsed config
  (`compiler.fast_compile`, else the run's length); with a checkpoint's `meta`, the kernels
  the run started with where the length chose them (a resume may extend the run). Returns
  whether the run's envs are JAX-native."""
  jax_native = jax_envs.is_jax_env(config.configured_env())
  config.construct(compiler.configure, env_steps=configured_env_steps(), jax_native=jax_native)
  keep_started_kernels(meta)
  return jax_native


def configured_env_steps():
  """A run's env steps a seed as the parsed config binds them: train_rl.n_epochs x the
  trainer's n_interactions_per_epoch; None when either is unbound (or not a number)."""
  trainer = config.bound_value('train_rl.trainer_class')
  n_epochs = config.bound_value('train_rl.n_epochs')
  per_epoch = trainer and config.bound_value(f'{trainer.selector}.n_interactions_per_epoch')
  if all(isinstance(v, int) and not isinstance(v, bool) for v in (n_epochs, per_epoch)):
    return n_epochs * per_epoch
  return None


def keep_started_kernels(meta):
  """The kernels a checkpoint's run started with (its `meta`), where the run's length chose
  them."""
  if meta and 'fast_compile' in meta and compiler.chosen_by_length():
    compiler.use(meta['fast_compile'])
