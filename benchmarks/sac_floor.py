"""SAC on HalfCheetah-v5 against its floor: the same gradient steps as a bare jitted scan.

Side by side in one run:
  bare  a `lax.scan` of SAC gradient steps written out here (twin (256, 256)
        critics, a (256, 256) tanh-Gaussian actor, the learned temperature,
        Polyak targets, Adam at 3e-4, batches of 256 drawn uniformly from a
        device buffer of 1M transitions), plain `jax.jit`: gradient steps/s.
        No env, no host work: at one gradient step per env step it bounds
        what any SAC can reach on this machine.
  rl    `python -m rl.run` on configs/sac_mujoco.gin, learning from the first
        epoch (SAC.learning_starts = 0), its 1M replay ring allocated: env
        steps/s of each epoch after the first two (collection and training,
        evaluation apart), so acting, env steps and the replay are counted.
  sbx   with --sbx_python, SBX's SAC at the same settings in its own virtual
        environment (benchmarks/sbx_sac.py): env steps/s while it learns.
Prints each and rl / bare (and rl / sbx).

  python benchmarks/sac_floor.py [--steps 1000] [--epochs 6] [--sbx_python PATH]
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import optax

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OBS, ACT, BATCH, HIDDEN, LR = 17, 6, 256, (256, 256), 3e-4  # HalfCheetah-v5, Zoo settings
GAMMA, TAU, CAPACITY = 0.99, 0.005, 1_000_000


class Mlp(nn.Module):
  out: int

  @nn.compact
  def __call__(self, x):
    for width in HIDDEN:
      x = nn.relu(nn.Dense(width)(x))
    return nn.Dense(self.out)(x)


class Twin(nn.Module):
  @nn.compact
  def __call__(self, obs, action):
    x = jnp.concatenate([obs, action], -1)
    return jnp.stack([Mlp(1)(x)[..., 0], Mlp(1)(x)[..., 0]])


def bare_steps_per_second(n_steps, repeats=3):
  """Gradient steps/s of a jitted scan of `n_steps` SAC steps (best of `repeats` calls)."""
  actor, critic, tx = Mlp(2 * ACT), Twin(), optax.adam(LR, eps=1e-8)
  key = jax.random.PRNGKey(0)
  actor_params = actor.init(key, jnp.zeros((1, OBS)))
  critic_params = critic.init(key, jnp.zeros((1, OBS)), jnp.zeros((1, ACT)))
  log_alpha = jnp.zeros(())

  rng = np.random.default_rng(0)
  buffer = tuple(jnp.asarray(rng.normal(size=(CAPACITY,) + shape).astype(np.float32))
                 for shape in ((OBS,), (ACT,), (), (), (OBS,)))

  def sample(params, obs, key):
    out = actor.apply(params, obs)
    mean, log_std = out[..., :ACT], jnp.clip(out[..., ACT:], -5, 2)
    noise = jax.random.normal(key, mean.shape)
    u = mean + jnp.exp(log_std) * noise
    log_prob = jnp.sum(-0.5 * noise ** 2 - log_std - 0.5 * np.log(2 * np.pi)
                       - 2 * (np.log(2) - u - jax.nn.softplus(-2 * u)), -1)
    return jnp.tanh(u), log_prob

  def step(carry, key):
    actor_params, critic_params, targets, log_alpha, opt_states = carry
    draw_key, next_key, pi_key = jax.random.split(key, 3)
    index = jax.random.randint(draw_key, (BATCH,), 0, CAPACITY)
    obs, action, reward, done, next_obs = (x[index] for x in buffer)
    alpha = jnp.exp(log_alpha)
    next_action, next_log_prob = sample(actor_params, next_obs, next_key)
    next_q = jnp.min(critic.apply(targets, next_obs, next_action), 0)
    y = reward + GAMMA * (1 - done) * (next_q - alpha * next_log_prob)

    def critic_loss(params):
      return jnp.sum(jnp.mean((critic.apply(params, obs, action) - y) ** 2, -1))

    def actor_loss(params):
      a, log_prob = sample(params, obs, pi_key)
      return jnp.mean(alpha * log_prob - jnp.min(critic.apply(critic_params, obs, a), 0)), \
          -jnp.mean(log_prob)

    opt_actor, opt_critic, opt_alpha = opt_states
    grads = jax.grad(critic_loss)(critic_params)
    updates, opt_critic = tx.update(grads, opt_critic, critic_params)
    critic_params = optax.apply_updates(critic_params, updates)
    grads, entropy = jax.grad(actor_loss, has_aux=True)(actor_params)
    updates, opt_actor = tx.update(grads, opt_actor, actor_params)
    actor_params = optax.apply_updates(actor_params, updates)
    grads = jax.grad(lambda la: la * (entropy + ACT))(log_alpha)
    updates, opt_alpha = tx.update(grads, opt_alpha, log_alpha)
    log_alpha = optax.apply_updates(log_alpha, updates)
    targets = optax.incremental_update(critic_params, targets, TAU)
    return (actor_params, critic_params, targets, log_alpha,
            (opt_actor, opt_critic, opt_alpha)), ()

  @jax.jit
  def run(carry, key):
    return jax.lax.scan(step, carry, jax.random.split(key, n_steps))[0]

  carry = (actor_params, critic_params, critic_params, log_alpha,
           (tx.init(actor_params), tx.init(critic_params), tx.init(log_alpha)))
  carry = jax.block_until_ready(run(carry, key))  # compile
  best = 0.0
  for i in range(repeats):
    start = time.perf_counter()
    carry = jax.block_until_ready(run(carry, jax.random.PRNGKey(i)))
    best = max(best, n_steps / (time.perf_counter() - start))
  return best


def rl_env_steps_per_second(n_epochs):
  """Env steps/s of rl's SAC on sac_mujoco.gin, epochs 3.. (median), learning throughout."""
  with tempfile.TemporaryDirectory() as out:
    subprocess.run(
        [sys.executable, '-m', 'rl.run', f'--config_file={ROOT}/configs/sac_mujoco.gin',
         f'--output_dir={out}', '--config', f'train_rl.n_epochs = {n_epochs}',
         '--config', 'SAC.learning_starts = 0', '--config', 'SAC.eval_every = 1000',
         '--config', 'SAC.n_eval_episodes = 1'],
        check=True, cwd=ROOT, stdout=subprocess.DEVNULL)
    with open(os.path.join(out, 'metrics.jsonl')) as f:
      rows = [json.loads(line) for line in f]
  rates = [1000 / (r['time_collect'] + r['time_train']) for r in rows[2:]]
  return float(np.median(rates))


def main():
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument('--steps', type=int, default=1000, help='gradient steps per bare call')
  parser.add_argument('--epochs', type=int, default=6, help='epochs of the rl run (>= 3)')
  parser.add_argument('--sbx_python', help='the Python of a virtual environment with SBX')
  args = parser.parse_args()
  sbx = None
  if args.sbx_python:
    out = subprocess.run([args.sbx_python, os.path.join(ROOT, 'benchmarks', 'sbx_sac.py')],
                         check=True, capture_output=True, text=True).stdout
    sbx = float(out.strip().splitlines()[-1].split(':')[1])
    print(f'SBX SAC: {sbx:.1f} env steps/s')
  bare = bare_steps_per_second(args.steps)
  print(f'bare jitted scan: {bare:.1f} gradient steps/s')
  ours = rl_env_steps_per_second(args.epochs)
  print(f'rl SAC (sac_mujoco.gin, one gradient step per env step): {ours:.1f} env steps/s')
  print(f'rl / bare: {ours / bare:.2f}')
  if sbx:
    print(f'rl / sbx: {ours / sbx:.2f}')


if __name__ == '__main__':
  main()
