"""The floor of benchmarks/jax_native_throughput.py: PPO on gymnax CartPole written out bare.

One `update` as a single function: a `lax.scan` over n_steps steps of
(actor/critic forward, categorical sample, gymnax env step with its
auto-reset, all vmapped over the envs), GAE by a reverse `lax.scan`, then
epochs x minibatches of the clipped PPO loss with optax, state in and state
out. Nothing else: no host work, no buffers, no logging. It is compiled the
way PureJaxRL compiles its `ppo.py`: plain `jax.jit` with XLA's default
options and JAX's default keys, with whole updates scanned in one call.
HPARAMS are PureJaxRL's published CartPole ones.
"""
import time

import flax.linen as nn
import gymnax
import jax
import jax.numpy as jnp
import numpy as np
import optax

ENV_ID = 'CartPole-v1'
HPARAMS = dict(
    n_envs=4, n_steps=128, epochs=4, minibatches=4, lr=2.5e-4, adam_eps=1e-5,
    gamma=0.99, gae_lambda=0.95, clip=0.2, ent_coef=0.01, vf_coef=0.5,
    max_grad_norm=0.5, hidden=64)



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


def make_ppo(hp, key_impl=None):
  """(init(seed) -> state, update(state) -> (state, (return sum, episodes)), steps/update).

  key_impl: a JAX PRNG implementation name; None: JAX's default (threefry2x32).
  """
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
    self._run = jax.jit(lambda s: jax.lax.scan(lambda c, _: update(c), s, None,
                                               length=n_updates))
    self.state = state

  def __call__(self):
    self.state, finished = self._run(self.state)
    return jax.block_until_ready(finished)


def seconds(loop):
  start = time.perf_counter()
  loop()
  return time.perf_counter() - start
