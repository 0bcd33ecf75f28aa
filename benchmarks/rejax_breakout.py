"""rejax's PPO on gymnax Breakout-MinAtar at rejax's `breakout_1m` settings: env steps per second.

rejax is not a dependency of rl: run this with the python of a separate venv
that has it, with the gymnax it is written for (its steps return 5 values):
`python -m venv /tmp/rejax && /tmp/rejax/bin/pip install rejax 'gymnax<1.0'`;
  /tmp/rejax/bin/python benchmarks/rejax_breakout.py [--total_timesteps 200000]
benchmarks/jax_native_throughput.py --rejax_python /tmp/rejax/bin/python runs it
beside rl. The whole training (rejax evaluates inside it every eval_freq env
steps) is one jitted call; the call is timed after its compilation, --repeats
times, and the last line printed is 'rejax env steps/s N' at the median time.
With --grid, the call trains a grid of clip ranges x learning rates x --seeds
vmapped (rejax's way of sweeping: its hyperparameters are pytree leaves), each
member --total_timesteps, and N counts the env steps of all members
(benchmarks/grid_speed.py measures rl's grids).
"""
import argparse
import statistics
import time

import itertools

import jax
import jax.numpy as jnp
from rejax import PPO

# rejax's benchmark/breakout_1m.yaml, PPO section.
SETTINGS = dict(env='Breakout-MinAtar', agent_kwargs={'activation': 'tanh'}, num_envs=32,
                num_steps=32, num_epochs=4, num_minibatches=4,
                learning_rate=0.00025674088686342003, max_grad_norm=1, eval_freq=50_000,
                gamma=0.995, gae_lambda=0.95, clip_eps=0.2, ent_coef=0.01, vf_coef=0.5)


# The grid of benchmarks/grid_speed.py: 4 clip ranges x 4 learning rates.
GRID_CLIP = (0.1, 0.15, 0.2, 0.3)
GRID_LEARNING_RATE = (0.0005, 0.001, 0.002, 0.004)


def grid_train(algo, n_seeds):
  """(key -> every member's training, the number of members): the grid x seeds vmapped."""
  cells = list(itertools.product(GRID_CLIP, GRID_LEARNING_RATE, range(n_seeds)))
  clip, rate, seed = (jnp.asarray(c) for c in zip(*cells))

  def train(key):
    def member(clip_eps, learning_rate, seed):
      return algo.replace(clip_eps=clip_eps, learning_rate=learning_rate).train(
          jax.random.fold_in(key, seed))
    return jax.vmap(member)(clip, rate, seed)
  return train, len(cells)


def main():
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument('--total_timesteps', type=int, default=200_000)
  parser.add_argument('--repeats', type=int, default=2)
  parser.add_argument('--grid', action='store_true', help='a 4 x 4 grid x --seeds, vmapped')
  parser.add_argument('--seeds', type=int, default=4, help="the grid's seeds")
  args = parser.parse_args()
  algo = PPO.create(total_timesteps=args.total_timesteps, **SETTINGS)
  train, n_members = grid_train(algo, args.seeds) if args.grid else (algo.train, 1)
  train = jax.jit(train)
  start = time.perf_counter()
  compiled = train.lower(jax.random.PRNGKey(0)).compile()
  print(f'compile {time.perf_counter() - start:.1f} s')
  times = []
  for seed in range(args.repeats):
    start = time.perf_counter()
    jax.block_until_ready(compiled(jax.random.PRNGKey(seed)))
    times.append(time.perf_counter() - start)
  print(f'rejax env steps/s '
        f'{n_members * args.total_timesteps / statistics.median(times):.0f}')


if __name__ == '__main__':
  main()
