"""How many env steps a second the CPU's matrix products allow a PPO setting of MLP networks.

An MLP PPO epoch on a JAX-native env is mostly the networks' matrix products:
acting (the policy's forward pass, and the value's for the advantages) and
training (forward and backward passes over every sample, `passes` times, for the
policy and the value network). This counts those multiply-adds per env step
for two settings on a MinAtar game, times how fast this machine multiplies
matrices of the networks' shapes (a jitted scan of [batch, width] @ [width,
width] products on every core), and prints the env steps a second that would
take if the products were all the epoch did: a ceiling no implementation on
this machine passes.

Defaults: the MinAtar config (configs/ppo_minatar_jax.gin: 256x256 MLPs,
4 passes of minibatches of 1,024) and rejax's `breakout_1m` settings (64x64
MLPs, 4 passes of minibatches of 256), on Breakout-MinAtar (400 inputs, 3
actions).

Usage: python benchmarks/arithmetic_bound.py [--inputs 400] [--actions 3]
"""
import argparse
import time

import jax
import jax.numpy as jnp

SETTINGS = {  # name: (hidden widths, passes over each sample, minibatch size)
    'rl ppo_minatar_jax.gin': ((256, 256), 4, 1024),
    'rejax breakout_1m': ((64, 64), 4, 256),
}


def network_macs(widths, n_in, n_out):
  """Multiply-adds of one forward pass of an MLP and of one forward and backward pass."""
  sizes = [n_in, *widths, n_out]
  layers = list(zip(sizes[:-1], sizes[1:]))
  forward = sum(a * b for a, b in layers)
  # Backward: each weight's gradient (as many as the forward pass) and each layer's input
  # gradient, except the first layer's (nothing reads the observation's gradient).
  backward = forward + sum(a * b for a, b in layers[1:])
  return forward, forward + backward


def macs_per_env_step(widths, passes, n_in, n_actions):
  """Acting (policy and value forward) plus `passes` forward-backward passes of both networks."""
  policy_forward, policy_train = network_macs(widths, n_in, n_actions)
  value_forward, value_train = network_macs(widths, n_in, 1)
  return policy_forward + value_forward + passes * (policy_train + value_train)


def matmul_flops_per_second(batch, width, n=2000, repeats=3):
  """The best of `repeats` timings of n chained [batch, width] @ [width, width] products."""
  x = jnp.ones((batch, width), jnp.float32)
  w = jnp.full((width, width), 1e-3, jnp.float32)

  @jax.jit
  def chain(x, w):
    return jax.lax.scan(lambda c, _: (jnp.tanh(c @ w), None), x, None, length=n)[0]
  chain(x, w).block_until_ready()
  best = float('inf')
  for _ in range(repeats):
    start = time.perf_counter()
    chain(x, w).block_until_ready()
    best = min(best, time.perf_counter() - start)
  return 2 * batch * width * width * n / best


def main():
  parser = argparse.ArgumentParser(description=__doc__.split('\n', maxsplit=1)[0])
  parser.add_argument('--inputs', type=int, default=400, help='observation features')
  parser.add_argument('--actions', type=int, default=3, help='discrete actions')
  args = parser.parse_args()
  print(f'{jax.device_count()} device(s): {jax.devices()[0].device_kind}')
  flops_of = {}
  for name, (widths, passes, batch) in SETTINGS.items():
    flops = flops_of[name] = 2 * macs_per_env_step(widths, passes, args.inputs, args.actions)
    ceiling = matmul_flops_per_second(batch, widths[-1])
    print(f'{name}: {flops / 1e6:.2f} MFLOP an env step; matrix products of its shapes run at '
          f'{ceiling / 1e9:.1f} GFLOP/s here: at most {ceiling / flops:,.0f} env steps/s')
  mine, theirs = flops_of.values()
  print(f'arithmetic an env step, rl/rejax: {mine / theirs:.2f}')


if __name__ == '__main__':
  main()
