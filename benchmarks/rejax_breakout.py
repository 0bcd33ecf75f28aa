"""rejax's PPO on gymnax Breakout-MinAtar at rejax's `breakout_1m` settings: env steps per second.

rejax is not a dependency of rl: run this with the python of a separate venv
that has it, with the gymnax it is written for (its steps return 5 values):
`python -m venv /tmp/rejax && /tmp/rejax/bin/pip install rejax 'gymnax<1.0'`;
  /tmp/rejax/bin/python benchmarks/rejax_breakout.py [--total_timesteps 200000]
benchmarks/jax_native_throughput.py --rejax_python /tmp/rejax/bin/python runs it
beside rl. The whole training (rejax evaluates inside it every eval_freq env
steps) is one jitted call; the call is timed after its compilation, --repeats
times, and the last line printed is 'rejax env steps/s N' at the median time.
"""
import argparse
import statistics
import time

import jax
from rejax import PPO

# rejax's benchmark/breakout_1m.yaml, PPO section.
SETTINGS = dict(env='Breakout-MinAtar', agent_kwargs={'activation': 'tanh'}, num_envs=32,
                num_steps=32, num_epochs=4, num_minibatches=4,
                learning_rate=0.00025674088686342003, max_grad_norm=1, eval_freq=50_000,
                gamma=0.995, gae_lambda=0.95, clip_eps=0.2, ent_coef=0.01, vf_coef=0.5)


def main():
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument('--total_timesteps', type=int, default=200_000)
  parser.add_argument('--repeats', type=int, default=2)
  args = parser.parse_args()
  train = jax.jit(PPO.create(total_timesteps=args.total_timesteps, **SETTINGS).train)
  start = time.perf_counter()
  compiled = train.lower(jax.random.PRNGKey(0)).compile()
  print(f'compile {time.perf_counter() - start:.1f} s')
  times = []
  for seed in range(args.repeats):
    start = time.perf_counter()
    jax.block_until_ready(compiled(jax.random.PRNGKey(seed)))
    times.append(time.perf_counter() - start)
  print(f'rejax env steps/s {args.total_timesteps / statistics.median(times):.0f}')


if __name__ == '__main__':
  main()
