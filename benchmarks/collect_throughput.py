"""Env steps per second of RLTask collection against its raw and floor costs.

Four loops run at the same number of envs, in one process:
  raw:     the vector env RLTask builds, stepped with pre-drawn random actions;
  floor:   the same env plus one jitted batched policy call per vector step,
           with the outputs converted to numpy (the least this design can cost);
  collect: GymTask.collect driven by a real A2C's
           collect_policy();
  transformer collect: the same with a Transformer policy body (d_model 64,
           2 layers, 4 heads) reading the episode's last 16 steps
           (RLTask.context_length = 16).
collect/floor says how much the task's own bookkeeping costs on top of the
floor; floor/raw says how much the policy call costs on top of the env;
transformer/mlp says what acting on a window of 16 steps costs against one
observation.

--dispatch async runs the same loops with JAX's asynchronous CPU dispatch,
against which rl.run's inline dispatch on host envs is measured.

Usage: python benchmarks/collect_throughput.py [--env CartPole-v1] [--n_envs 8]
         [--steps 20000] [--repeats 5] [--dispatch inline]
"""
import argparse
import os
import statistics
import sys
import time

# Run as a plain script from a checkout: the repo root is not on sys.path then
# (only benchmarks/ is), and the package need not be installed.
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import gin  # noqa: E402
import jax  # noqa: E402
import numpy as np  # noqa: E402

from rl import compiler  # noqa: E402
from rl import cpu_client  # noqa: E402
from rl.ops import distributions  # noqa: E402
from rl.envs import vector_envs  # noqa: E402
from rl import keys  # noqa: E402
from rl.nets import heads  # noqa: E402
from rl.nets.variables import init_variables  # noqa: E402
from rl.envs.task import RLTask  # noqa: E402
from rl.algorithms.a2c import A2C  # noqa: E402
from rl.nets import transformer  # noqa: E402,F401  (registers @TransformerDecoder)

# The Transformer policy of the 'transformer collect' loop.
TRANSFORMER_CONTEXT = 16
TRANSFORMER_BINDINGS = [
    'Policy.body = @TransformerDecoder', 'Value.body = @TransformerDecoder',
    'TransformerDecoder.d_model = 64', 'TransformerDecoder.d_ff = 256',
    'TransformerDecoder.n_heads = 4', 'TransformerDecoder.n_layers = 2']


def _parse_args():
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument('--env', default='CartPole-v1', help='gymnasium env id')
  parser.add_argument('--n_envs', type=int, default=8, help='envs stepped together')
  parser.add_argument('--steps', type=int, default=20000,
                      help='env steps per measurement (a multiple of n_envs)')
  parser.add_argument('--repeats', type=int, default=5,
                      help='timed measurements of each loop; the median is reported')
  parser.add_argument('--dispatch', choices=('inline', 'async'), default='inline',
                      help="JAX's CPU dispatch (rl.run uses inline on host envs)")
  args = parser.parse_args()
  if args.n_envs < 1 or args.repeats < 1:
    parser.error('--n_envs and --repeats must be >= 1')
  if args.steps < args.n_envs or args.steps % args.n_envs:
    # GymTask.collect rejects other counts, and all the loops must do the
    # same work for the ratios to mean anything.
    parser.error(f'--steps ({args.steps}) must be a positive multiple of '
                 f'--n_envs ({args.n_envs})')
  return args


class RawLoop:
  """The task's vector env stepped with random actions drawn before timing."""

  def __init__(self, env_id, n_envs, n_vector_steps, seed):
    self._env = vector_envs.make_vector_env(env_id, n_envs)
    self._env.action_space.seed(seed)
    # Drawn up front so the timed loop measures the env alone, not the sampler.
    self._actions = np.stack([self._env.action_space.sample()
                              for _ in range(n_vector_steps)])
    self._env.reset(seed=seed)

  def run(self, n_vector_steps):
    env, actions = self._env, self._actions
    for t in range(n_vector_steps):
      env.step(actions[t])

  def close(self):
    self._env.close()


class FloorLoop:
  """The same env plus the design's batched policy: one jitted call per step.

  The jitted function mirrors what the trainer's acting function computes for
  a default Policy (no normaliser): the model on [n_envs, 1, ...] observations,
  the last timestep's dist_inputs, a key split and a temperature-1 sample. Its
  outputs go through np.asarray as RLTask needs numpy actions for the env and
  its buffers. Nothing else is done per step, so this is the floor.
  """

  def __init__(self, env_id, n_envs, seed):
    self._env = vector_envs.make_vector_env(env_id, n_envs)
    space = self._env.single_observation_space
    dist = distributions.create_distribution(self._env.single_action_space)
    model = heads.Policy(policy_distribution=dist)
    example = np.zeros((1, 1) + space.shape, space.dtype)
    self._params = init_variables(model, keys.seed_key(seed), example)['params']
    self._key = keys.seed_key(seed)

    def act(params, obs, key):
      dist_inputs = model.apply({'params': params}, obs[:, None])[:, -1]
      key, sample_key = jax.random.split(key)
      return dist.sample(dist_inputs, sample_key, 1.0), dist_inputs, key

    self._act = compiler.jit(act)
    self._obs, _ = self._env.reset(seed=seed)

  def run(self, n_vector_steps):
    env, act, params = self._env, self._act, self._params
    obs, key = self._obs, self._key
    for _ in range(n_vector_steps):
      actions, dist_inputs, key = act(params, obs, key)
      actions, dist_inputs = np.asarray(actions), np.asarray(dist_inputs)
      obs = env.step(actions)[0]
    # Carried over so the next measurement continues the same episodes, as
    # RLTask does across epochs.
    self._obs, self._key = obs, key

  def close(self):
    self._env.close()


class CollectLoop:
  """RLTrainer.collect with an A2C's policy network, as run_epoch does.

  A2C rather than REINFORCE: its epochs may be counted in env steps (REINFORCE
  refuses the cut episodes that makes), and both act with the same Policy.
  """

  def __init__(self, env_id, n_envs, steps, seed, context_length=None):
    # Built directly, not from a config file: whatever gin bindings an
    # importer left behind must not change the task or the model.
    gin.clear_config()
    if context_length is not None:
      gin.parse_config(TRANSFORMER_BINDINGS)
    self.task = RLTask(env=env_id, n_envs=n_envs, seed=seed, context_length=context_length)
    self.trainer = A2C(self.task, n_interactions_per_epoch=steps)
    gin.clear_config()
    self._steps = steps
    self._epoch = 0

  def run(self, n_vector_steps):
    # Each measurement is one epoch's collection, the unit the runner times as
    # time_collect; it includes the end-of-epoch flush and store.
    assert n_vector_steps * self.task.n_envs == self._steps
    self._epoch += 1
    self.trainer.learner.collect(n_interactions=self._steps, epoch_id=self._epoch)

  def close(self):
    self.trainer.close()


def _timed(loop, n_vector_steps):
  start = time.perf_counter()
  loop.run(n_vector_steps)
  return time.perf_counter() - start


def main():
  args = _parse_args()
  # rl.run computes inline on host envs (rl.cpu_client).
  cpu_client.choose_dispatch(inline=args.dispatch == 'inline')
  n_vector_steps = args.steps // args.n_envs
  seed = 0
  loops = {
      'raw': RawLoop(args.env, args.n_envs, n_vector_steps, seed),
      'floor': FloorLoop(args.env, args.n_envs, seed),
      'collect': CollectLoop(args.env, args.n_envs, args.steps, seed),
      'transformer': CollectLoop(args.env, args.n_envs, args.steps, seed,
                                 context_length=TRANSFORMER_CONTEXT),
  }
  # One untimed full-size pass each: jit compilation, first resets, the task's
  # buffer allocation and first epoch store all happen here, not in a timing.
  for loop in loops.values():
    loop.run(n_vector_steps)

  rates = {name: [] for name in loops}
  # Interleaved (raw, floor, collect, transformer, raw, ...) so slow drifts of the
  # machine (other processes, thermal, frequency) fall on all loops alike.
  for _ in range(args.repeats):
    for name, loop in loops.items():
      rates[name].append(args.steps / _timed(loop, n_vector_steps))
  for loop in loops.values():
    loop.close()

  median = {name: statistics.median(r) for name, r in rates.items()}
  labels = {
      'raw': 'raw (vector env, pre-drawn random actions)',
      'floor': 'floor (vector env + jitted batched policy)',
      'collect': 'collect (RLTask.collect + A2C.collect_policy)',
      'transformer': (f'transformer collect (the same, a Transformer body on windows of '
                      f'{TRANSFORMER_CONTEXT} steps)'),
  }
  print(f'env {args.env}, n_envs {args.n_envs}, {args.steps} env steps per measurement, '
        f'median of {args.repeats} interleaved repeats, jax {jax.__version__} '
        f'on {jax.default_backend()}')
  for name in loops:
    spread = f'{min(rates[name]):.0f}..{max(rates[name]):.0f}'
    us_per_vector_step = 1e6 * args.n_envs / median[name]
    print(f'{labels[name]}: {median[name]:.0f} env steps/s '
          f'({us_per_vector_step:.1f} us per vector step; range {spread})')
  print(f'floor/raw ratio: {median["floor"] / median["raw"]:.2f}')
  print(f'transformer/mlp collect ratio: {median["transformer"] / median["collect"]:.2f}')
  # Last line by contract: scripts compare runs by parsing it.
  print(f'collect/floor ratio: {median["collect"] / median["floor"]:.2f}')


if __name__ == '__main__':
  main()
