"""Env steps per second of PPO on gymnax CartPole-v1: a bare jitted floor and rl.run.

Hyperparameters are PureJaxRL's published CartPole ones (HPARAMS of
benchmarks/ppo_floor.py): 4 envs x 128 steps per update, 4 epochs x 4
minibatches, Adam(2.5e-4, eps 1e-5, no anneal) after clip_by_global_norm(0.5),
gamma 0.99, GAE lambda 0.95, clip 0.2, entropy 0.01, value 0.5, separate 64x64
tanh actor and critic with orthogonal init.

(a) the floor (benchmarks/ppo_floor.py): one `update` written out as a single
    jitted function: a `lax.scan` over 128 steps of (actor/critic forward,
    categorical sample, gymnax env step with its auto-reset, all vmapped over
    the 4 envs), GAE by a reverse `lax.scan`, then 4 epochs x 4 minibatches of the clipped PPO loss
    with optax. Nothing else: no host work, no buffers, no logging. Two ways to
    run --updates updates per timed call:
      scan: one jitted `lax.scan` over the updates;
      loop: a Python loop over the jitted update (one dispatch per update).
    The faster of the two is the floor. It is then also run as `jax.vmap` over
    --seeds seeds (steps of all seeds counted), the way a seed sweep would.
(b) rl.run's fused epoch: rl's PPOJoint with the same hyperparameters on the
    JAX-native backend (RUNNER_CONFIG: the floor's algorithm, one loss and
    one optimizer over separate actor and critic bodies, advantages computed
    once an update), timed epoch by epoch as rl.run runs it, and its epoch
    under jax.vmap over --seeds copies (rl.run --seeds). rl's PPO (separate
    networks with their own optimizers, trained one after the other) is
    timed too, for comparison.

How to read it: 'compile' is the first call (trace + compile + run) minus a
steady call; steps/s are medians of --repeats timed calls after one warm-up
call. The floors and the runners take turns, one timed call each per round,
so that the load of a shared machine, which drifts, weighs on all of them
alike. 'learning' continues the scan state up to --learn_steps env steps and
prints the mean return of the episodes finished in its last call, to show the
floor is the real algorithm (PureJaxRL's CartPole reaches ~500 by ~500k
steps). The last line is `jax_native/floor ratio: X.XX` (runner steps/s over
floor steps/s; the goal is >= 0.8).

Usage: nice -n 10 python benchmarks/jax_native_throughput.py [--updates 25]
         [--repeats 9] [--seeds 8] [--learn_steps 100000] [--key_impl rl]
"""
import argparse
import os
import statistics
import sys
import time

# Run as a plain script from a checkout: the repo root is not on sys.path then.
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

from benchmarks.ppo_floor import ENV_ID  # noqa: E402
from benchmarks.ppo_floor import HPARAMS  # noqa: E402
from benchmarks.ppo_floor import PythonLoop  # noqa: E402
from benchmarks.ppo_floor import ScanLoop  # noqa: E402
from benchmarks.ppo_floor import learning_check  # noqa: E402
from benchmarks.ppo_floor import make_ppo  # noqa: E402
from benchmarks.ppo_floor import measure_vmapped  # noqa: E402
from benchmarks.ppo_floor import seconds  # noqa: E402
from rl import compiler  # noqa: E402  (the runner's compiler options, for both sides)
from rl import keys as rl_keys  # noqa: E402  (the runner's keys, for both sides)


def _parse_args():
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument('--updates', type=int, default=25,
                      help='PPO updates per timed call (each is n_envs x n_steps env steps)')
  parser.add_argument('--repeats', type=int, default=9,
                      help='timed calls of each loop; the median is reported')
  parser.add_argument('--seeds', type=int, default=8,
                      help='seeds of the vmapped floor (0 skips it)')
  parser.add_argument('--learn_steps', type=int, default=100_000,
                      help='env steps of the learning check (0 skips it)')
  parser.add_argument('--key_impl', default='rl', choices=('rl', 'rbg', 'threefry2x32'),
                      help="the floor's PRNG implementation: rl.keys' ('rl': threefry with "
                      "its hash written out) or one of JAX's")
  args = parser.parse_args()
  if args.updates < 1 or args.repeats < 1:
    parser.error('--updates and --repeats must be >= 1')
  if args.seeds < 0 or args.learn_steps < 0:
    parser.error('--seeds and --learn_steps must be >= 0')
  return args


# ---------------------------------------------------------------------------
# (b) rl.run's fused epoch.
# ---------------------------------------------------------------------------

# HPARAMS as gin configs of rl on the JAX-native backend: the task and model
# bindings both runner configs share, then each trainer's. What the runner's
# design keeps different from the floor: minibatches drawn at random rather
# than as a permutation of the epoch, and GAE through
# added_policy_slice_length = 64 steps (the floor runs it over the whole
# 128-step rollout; (0.99 * 0.95)^64 = 2%).
_TASK = """
RLTask.env = 'gymnax:{env}'
RLTask.n_envs = {n_envs}
RLTask.gamma = {gamma}
RLTask.seed = 0
"""
_MODEL = """
MLP.layer_widths = ({hidden}, {hidden})
MLP.activation_fn = 'tanh'
multifactor.factors = 'constant'
multifactor.constant = {lr}
Adam.weight_decay_rate = 0.0
Adam.eps = {adam_eps}
Adam.clip_grad_norm = {max_grad_norm}
"""


def _ppo_bindings(trainer):
  """The PPO bindings both trainers take, under `trainer`'s gin name."""
  return """{trainer}.n_interactions_per_epoch = {{steps}}
{trainer}.n_eval_episodes = 0
{trainer}.epsilon = {{clip}}
{trainer}.entropy_coeff = {{ent_coef}}
{trainer}.advantage_estimator = @gae
gae.lambda_ = {{gae_lambda}}
{trainer}.added_policy_slice_length = 64
{trainer}.max_slice_length = 1
""".format(trainer=trainer)


# rl's PPOJoint is the floor's algorithm: one network pair trained by one loss
# (clipped surrogate + value + entropy) with one optimizer, on advantages
# computed once per update from the network as the update starts
# (advantages_per_chunk; GAE looks 64 steps ahead, bootstrapping beyond).
# The floor's value term is vf_coef * 0.5 * squared error, hence a
# value_loss_coeff of vf_coef / 2 on rl's mean squared error.
RUNNER_CONFIG = _TASK + _ppo_bindings('PPOJoint') + """PPOJoint.value_loss_coeff = {value_coeff}
PPOJoint.advantages_per_chunk = True
PPOJoint.batch_size = {batch}
PPOJoint.train_steps_per_epoch = {n_updates}
PPOJoint.joint_model = @PolicyAndValue
PolicyAndValue.joint = False
""" + _MODEL

# For comparison: rl's PPO, separate policy and value networks with their own
# optimizers, trained in turn (the value network's steps, then the policy's
# on advantages from the trained value network): twice the gradient steps
# and two advantage passes per update.
SEPARATE_CONFIG = _TASK + _ppo_bindings('PPO') + """PPO.policy_batch_size = {batch}
PPO.policy_train_steps_per_epoch = {n_updates}
PPO.value_batch_size = {batch}
PPO.value_train_steps_per_epoch = {n_updates}
""" + _MODEL


def runner_config(hp, template=RUNNER_CONFIG):
  """A runner config for the hyperparameters `hp` (HPARAMS)."""
  steps = hp['n_envs'] * hp['n_steps']
  return template.format(env=ENV_ID, steps=steps, batch=steps // hp['minibatches'],
                         n_updates=hp['epochs'] * hp['minibatches'],
                         value_coeff=hp['vf_coef'] / 2, **hp)


def build_runner(args, trainer_name='PPOJoint', template=RUNNER_CONFIG):
  """rl's trainer on the same problem; returns `call`, which runs --updates epochs.

  One epoch of rl is one PPO update of the floor (512 env steps, 16
  gradient steps). `call` runs them as rl.run does: `run_epoch` (the
  compiled epoch, with the next one dispatched before this one's metrics
  are read back and booked on the host).
  """
  import gin  # pylint: disable=import-outside-toplevel
  from rl import experiment  # pylint: disable=import-outside-toplevel,unused-import  (gin names)
  from rl.envs.task import RLTask  # pylint: disable=import-outside-toplevel
  from rl import algorithms as trainers  # pylint: disable=import-outside-toplevel
  gin.clear_config()
  gin.parse_config(runner_config(HPARAMS, template))
  trainer = getattr(trainers, trainer_name)(RLTask())
  gin.clear_config()
  # As rl.run's epoch loop sets it: with a last epoch still to come, each
  # epoch dispatches the next before its host bookkeeping (no evaluation is
  # configured, so none is ever due).
  trainer.learner.last_epoch = 10**9

  def call():
    for _ in range(args.updates):
      trainer.learner.run_epoch()
  return trainer, call


def measure_runner_vmapped(args, trainer):
  """The trainer's epoch (`jax_epoch`) under jax.vmap over --seeds copies of its
  state, as `rl.run --seeds` runs it; all seeds' steps count."""
  steps = args.seeds * args.updates * HPARAMS['n_envs'] * HPARAMS['n_steps']
  stack = lambda tree: jax.tree_util.tree_map(  # noqa: E731
      lambda x: jnp.stack([x] * args.seeds), tree)
  epoch = compiler.jit(jax.vmap(trainer.learner.jax_epoch, in_axes=(0, 0, None, None, None)),
                       static_argnums=4)
  current = [stack(trainer.learner.train_state), stack(trainer.task.carry)]

  def vmapped():
    for _ in range(args.updates):
      outputs = epoch(*current, (), np.int32(1), trainer.learner.jax_epoch_steps)
      current[:] = outputs[:2]
      jax.device_get(outputs[2:])  # the metrics, read back as rl.seeds does
  first = seconds(vmapped)
  times = [seconds(vmapped) for _ in range(args.repeats)]
  steady = statistics.median(times)
  return dict(compile=first - steady, rate=steps / steady)


def measure_interleaved(args, calls, steps):
  """{name: result} of the `calls` ({name: callable}), timed in turn.

  Each call's first run (compilation included) is timed alone; then the
  calls take turns --repeats times, so that a change in the machine's load
  hits all of them alike, and each gets the median of its turns. Besides
  wall-clock seconds, each turn's CPU seconds (this process's, all threads)
  are kept: other tenants of a shared machine stretch wall time far more
  than the CPU time a computation needs, so the CPU figure varies less.
  """
  first = {name: seconds(call) for name, call in calls.items()}
  times = {name: [] for name in calls}
  cpu = {name: [] for name in calls}
  for _ in range(args.repeats):
    for name, call in calls.items():
      start = time.process_time()
      times[name].append(seconds(call))
      cpu[name].append(time.process_time() - start)
  results = {}
  for name, t in times.items():
    steady = statistics.median(t)
    results[name] = dict(compile=first[name] - steady, rate=steps / steady,
                         spread=(steps / max(t), steps / min(t)),
                         cpu_rate=steps / statistics.median(cpu[name]))
  return results


def main():
  args = _parse_args()
  impl = rl_keys.IMPL if args.key_impl == 'rl' else args.key_impl
  init, update, steps_per_update = make_ppo(HPARAMS, impl)
  print(f'env gymnax {ENV_ID}, PPO {HPARAMS}, {args.updates} updates '
        f'({args.updates * steps_per_update} env steps) per timed call, median of '
        f'{args.repeats}, jax {jax.__version__} on {jax.default_backend()}, '
        f'{os.cpu_count()} cores, keys {args.key_impl}')

  state = compiler.jit(init)(0)
  loops = {'scan': ScanLoop(update, state, args.updates),
           'loop': PythonLoop(update, state, args.updates)}
  runner, runner_call = build_runner(args)
  _, separate_call = build_runner(args, 'PPO', SEPARATE_CONFIG)
  results = measure_interleaved(args, {**loops, 'runner': runner_call,
                                       'separate': separate_call},
                                args.updates * steps_per_update)
  labels = {'scan': 'floor scan (updates in one jitted lax.scan)',
            'loop': 'floor loop (Python loop over the jitted update)',
            'runner': 'runner (rl PPOJoint, run_epoch)',
            'separate': 'rl PPO, separate networks trained in turn (run_epoch)'}
  for name, r in results.items():
    print(f"{labels[name]}: {r['rate']:,.0f} env steps/s "
          f"(range {r['spread'][0]:,.0f}..{r['spread'][1]:,.0f}), compile {r['compile']:.2f} s")
  best = max(loops, key=lambda name: results[name]['rate'])
  floor_rate = results[best]['rate']
  print(f'floor: {floor_rate:,.0f} env steps/s ({best})')
  print(f"per CPU second (all threads): floor {results[best]['cpu_rate']:,.0f}, runner "
        f"{results['runner']['cpu_rate']:,.0f} env steps; runner/floor "
        f"{results['runner']['cpu_rate'] / results[best]['cpu_rate']:.2f}")
  print(f"rl PPO, separate networks: {results['separate']['rate'] / floor_rate:.2f} of the floor")

  if args.seeds:
    v = measure_vmapped(args, init, update, steps_per_update, best)
    print(f"floor vmap {args.seeds} seeds ({best}): {v['rate']:,.0f} env steps/s all seeds "
          f"(range {v['spread'][0]:,.0f}..{v['spread'][1]:,.0f}; "
          f"{v['rate'] / floor_rate:.2f}x one seed), compile {v['compile']:.2f} s")
    v = measure_runner_vmapped(args, runner)
    print(f"runner vmap {args.seeds} seeds (jax_epoch): {v['rate']:,.0f} env steps/s all seeds "
          f"({v['rate'] / results['runner']['rate']:.2f}x one seed), "
          f"compile {v['compile']:.2f} s")

  if args.learn_steps:
    steps, mean_return, episodes = learning_check(args, loops['scan'], steps_per_update)
    print(f'learning (floor scan, seed 0): mean return {mean_return:.1f} over the '
          f'{episodes:.0f} episodes finished in the last {args.updates} updates, '
          f'at {steps:,} env steps')

  print(f"jax_native/floor ratio: {results['runner']['rate'] / floor_rate:.2f}")


if __name__ == '__main__':
  main()

