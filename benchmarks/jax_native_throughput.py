"""Env steps per second of PPO on gymnax CartPole-v1: a bare jitted floor and rl.run.

Hyperparameters are PureJaxRL's published CartPole ones (HPARAMS below):
4 envs x 128 steps per update, 4 epochs x 4 minibatches, Adam(2.5e-4, eps
1e-5, no anneal) after clip_by_global_norm(0.5), gamma 0.99, GAE lambda 0.95,
clip 0.2, entropy 0.01, value 0.5, separate 64x64 tanh actor and critic with
orthogonal init.

(a) the floor: one `update` written out here as a single jitted function:
    a `lax.scan` over 128 steps of (actor/critic forward, categorical sample,
    gymnax env step with its auto-reset, all vmapped over the 4 envs), GAE by
    a reverse `lax.scan`, then 4 epochs x 4 minibatches of the clipped PPO loss
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

import flax.linen as nn  # noqa: E402
import gymnax  # noqa: E402
import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
import optax  # noqa: E402

from rl import compiler  # noqa: E402  (the runner's compiler options, for both sides)
from rl import keys as rl_keys  # noqa: E402  (the runner's keys, for both sides)

ENV_ID = 'CartPole-v1'
HPARAMS = dict(
    n_envs=4, n_steps=128, epochs=4, minibatches=4, lr=2.5e-4, adam_eps=1e-5,
    gamma=0.99, gae_lambda=0.95, clip=0.2, ent_coef=0.01, vf_coef=0.5,
    max_grad_norm=0.5, hidden=64)


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
                      help="the floor's PRNG implementation: rl.keys' ('rl': 'rbg' with "
                      "threefry written out) or one of JAX's")
  args = parser.parse_args()
  if args.updates < 1 or args.repeats < 1:
    parser.error('--updates and --repeats must be >= 1')
  if args.seeds < 0 or args.learn_steps < 0:
    parser.error('--seeds and --learn_steps must be >= 0')
  return args


# ---------------------------------------------------------------------------
# (a) The floor.
# ---------------------------------------------------------------------------

class Mlp(nn.Module):
  """Two tanh hidden layers, then a linear head; orthogonal weights, zero biases."""
  hidden: int
  out: int
  head_scale: float

  @nn.compact
  def __call__(self, x):
    for _ in range(2):
      x = nn.Dense(self.hidden, kernel_init=nn.initializers.orthogonal(np.sqrt(2)),
                   bias_init=nn.initializers.zeros)(x)
      x = jnp.tanh(x)
    return nn.Dense(self.out, kernel_init=nn.initializers.orthogonal(self.head_scale),
                    bias_init=nn.initializers.zeros)(x)


def make_ppo(hp, key_impl):
  """(init(seed) -> state, update(state) -> (state, (return sum, episodes)), steps/update)."""
  env, env_params = gymnax.make(ENV_ID)
  n_actions = env.action_space(env_params).n
  obs_shape = env.observation_space(env_params).shape
  actor = Mlp(hp['hidden'], n_actions, 0.01)
  critic = Mlp(hp['hidden'], 1, 1.0)
  tx = optax.chain(optax.clip_by_global_norm(hp['max_grad_norm']),
                   optax.adam(hp['lr'], eps=hp['adam_eps']))
  n_envs, n_steps = hp['n_envs'], hp['n_steps']
  batch = n_envs * n_steps
  mb_size = batch // hp['minibatches']
  env_reset = jax.vmap(env.reset, in_axes=(0, None))
  env_step = jax.vmap(env.step, in_axes=(0, 0, 0, None))

  def heads(params, obs):
    logits = actor.apply({'params': params['actor']}, obs)
    value = critic.apply({'params': params['critic']}, obs)[..., 0]
    return logits, value

  def init(seed):
    key = jax.random.key(seed, impl=key_impl)
    key, k_actor, k_critic, k_env = jax.random.split(key, 4)
    dummy = jnp.zeros((1,) + obs_shape, jnp.float32)
    params = {'actor': actor.init(k_actor, dummy)['params'],
              'critic': critic.init(k_critic, dummy)['params']}
    obs, env_state = env_reset(jax.random.split(k_env, n_envs), env_params)
    return dict(params=params, opt_state=tx.init(params), obs=obs, env_state=env_state,
                key=key, ep_return=jnp.zeros((n_envs,), jnp.float32))

  def act_step(carry, _):
    params, obs, env_state, key, ep_return = carry
    key, k_act, k_env = jax.random.split(key, 3)
    logits, value = heads(params, obs)
    action = jax.random.categorical(k_act, logits)
    logp = jnp.take_along_axis(jax.nn.log_softmax(logits), action[:, None], -1)[:, 0]
    next_obs, env_state, reward, terminated, truncated, _ = env_step(
        jax.random.split(k_env, n_envs), env_state, action, env_params)
    # As PureJaxRL: an episode end (termination or the 500-step truncation)
    # cuts the bootstrap.
    done = jnp.logical_or(terminated, truncated)
    ep_return = ep_return + reward
    finished = (jnp.sum(jnp.where(done, ep_return, 0.0)), jnp.sum(done))
    ep_return = jnp.where(done, 0.0, ep_return)
    step = dict(obs=obs, action=action, logp=logp, value=value,
                reward=reward.astype(jnp.float32), done=done.astype(jnp.float32))
    return (params, next_obs, env_state, key, ep_return), (step, finished)

  def gae(traj, last_value):
    def back(carry, t):
      adv_next, value_next = carry
      nonterminal = 1.0 - t['done']
      delta = t['reward'] + hp['gamma'] * value_next * nonterminal - t['value']
      adv = delta + hp['gamma'] * hp['gae_lambda'] * nonterminal * adv_next
      return (adv, t['value']), adv
    _, adv = jax.lax.scan(back, (jnp.zeros_like(last_value), last_value),
                          {k: traj[k] for k in ('done', 'reward', 'value')}, reverse=True)
    return adv, adv + traj['value']

  def loss_fn(params, mb):
    logits, value = heads(params, mb['obs'])
    log_probs = jax.nn.log_softmax(logits)
    logp = jnp.take_along_axis(log_probs, mb['action'][:, None], -1)[:, 0]
    ratio = jnp.exp(logp - mb['logp'])
    adv = (mb['adv'] - mb['adv'].mean()) / (mb['adv'].std() + 1e-8)
    policy_loss = -jnp.minimum(
        ratio * adv, jnp.clip(ratio, 1 - hp['clip'], 1 + hp['clip']) * adv).mean()
    value_clipped = mb['value'] + jnp.clip(value - mb['value'], -hp['clip'], hp['clip'])
    value_loss = 0.5 * jnp.maximum(jnp.square(value - mb['target']),
                                   jnp.square(value_clipped - mb['target'])).mean()
    entropy = -jnp.sum(jnp.exp(log_probs) * log_probs, -1).mean()
    return policy_loss + hp['vf_coef'] * value_loss - hp['ent_coef'] * entropy

  def sgd_step(carry, mb):
    params, opt_state = carry
    grads = jax.grad(loss_fn)(params, mb)
    updates, opt_state = tx.update(grads, opt_state, params)
    return (optax.apply_updates(params, updates), opt_state), None

  def epoch(carry, key):
    params, opt_state, flat = carry
    perm = jax.random.permutation(key, batch)
    mbs = jax.tree.map(lambda x: x[perm].reshape((hp['minibatches'], mb_size) + x.shape[1:]),
                       flat)
    (params, opt_state), _ = jax.lax.scan(sgd_step, (params, opt_state), mbs)
    return (params, opt_state, flat), None

  def update(state):
    params = state['params']
    carry = (params, state['obs'], state['env_state'], state['key'], state['ep_return'])
    carry, (traj, finished) = jax.lax.scan(act_step, carry, None, length=n_steps)
    _, obs, env_state, key, ep_return = carry
    _, last_value = heads(params, obs)
    traj['adv'], traj['target'] = gae(traj, last_value)
    flat = jax.tree.map(lambda x: x.reshape((batch,) + x.shape[2:]), traj)
    key, k_epochs = jax.random.split(key)
    (params, opt_state, _), _ = jax.lax.scan(
        epoch, (params, state['opt_state'], flat), jax.random.split(k_epochs, hp['epochs']))
    state = dict(params=params, opt_state=opt_state, obs=obs, env_state=env_state,
                 key=key, ep_return=ep_return)
    return state, jax.tree.map(jnp.sum, finished)

  return init, update, batch


class ScanLoop:
  """`n_updates` updates as one jitted `lax.scan`: one dispatch per call."""

  def __init__(self, update, state, n_updates):
    self._run = compiler.jit(lambda s: jax.lax.scan(lambda c, _: update(c), s, None,
                                                    length=n_updates))
    self.state = state

  def __call__(self):
    self.state, finished = self._run(self.state)
    return jax.block_until_ready(finished)


class PythonLoop:
  """`n_updates` calls of the jitted update from Python; one sync at the end."""

  def __init__(self, update, state, n_updates):
    self._run = compiler.jit(update)
    self._n = n_updates
    self.state = state

  def __call__(self):
    state, per_update = self.state, []
    for _ in range(self._n):
      state, finished = self._run(state)
      per_update.append(finished)
    self.state = state
    return jax.block_until_ready(per_update)


def _seconds(loop):
  start = time.perf_counter()
  loop()
  return time.perf_counter() - start


def measure_vmapped(args, init, update, steps_per_update, kind):
  """The `kind` floor over args.seeds seeds in one jax.vmap; all seeds' steps count."""
  # Each seed initialised on its own, then stacked (as rl.run --seeds does):
  # under vmap the orthogonal initialiser becomes one batched QR, and on
  # the CPU jaxlib spreads a batched QR over the same thread pool that runs
  # it; two of them on a 2-thread pool wait on each other for ever (seen as
  # a hang in block_until_ready, no CPU used).
  one = compiler.jit(init)
  states = jax.tree_util.tree_map(lambda *x: jnp.stack(x),
                                  *[one(seed) for seed in range(args.seeds)])
  loop_class = ScanLoop if kind == 'scan' else PythonLoop
  loop = loop_class(jax.vmap(update), states, args.updates)
  first = _seconds(loop)
  times = [_seconds(loop) for _ in range(args.repeats)]
  steady = statistics.median(times)
  return dict(compile=first - steady, rate=args.seeds * args.updates * steps_per_update / steady,
              spread=(args.seeds * args.updates * steps_per_update / max(times),
                      args.seeds * args.updates * steps_per_update / min(times)))


def learning_check(args, scan_loop, steps_per_update):
  """Continues the scan floor to >= learn_steps; (steps, mean return in the last call)."""
  per_call = args.updates * steps_per_update
  calls_done = 1 + args.repeats  # warm-up + timed calls already made
  finished = None
  while finished is None or calls_done * per_call < args.learn_steps:
    finished = scan_loop()
    calls_done += 1
  return_sum, episodes = (float(np.sum(x)) for x in finished)
  return calls_done * per_call, (return_sum / episodes if episodes else float('nan')), episodes


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
  first = _seconds(vmapped)
  times = [_seconds(vmapped) for _ in range(args.repeats)]
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
  first = {name: _seconds(call) for name, call in calls.items()}
  times = {name: [] for name in calls}
  cpu = {name: [] for name in calls}
  for _ in range(args.repeats):
    for name, call in calls.items():
      start = time.process_time()
      times[name].append(_seconds(call))
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
