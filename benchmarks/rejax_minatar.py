"""rejax's PPO at its `breakout_1m` settings on each gymnax MinAtar game: greedy returns.

The side of the MinAtar comparison in docs/results.md that rl does not run: rejax's
PPO (benchmarks/rejax_breakout.py's SETTINGS, tuned by rejax on Breakout) trained
on each game for --total_timesteps, its --seeds vmapped in one jitted call, and
evaluated greedily (the most probable action, --eval_episodes episodes) every
--eval_every env steps and at the end, as rl evaluates. rejax is not a
dependency of rl: run this with the python of a separate venv that has it,
`python -m venv /tmp/rejax && /tmp/rejax/bin/pip install rejax 'gymnax<1.0'`;
  /tmp/rejax/bin/python benchmarks/rejax_minatar.py --out runs/rejax_minatar.json
Each game's result is added to --out as soon as it is trained (one JSON object a
line: game, seed, the greedy evals and their env steps), and a game already there
is skipped, so a rerun after an interruption trains only the games left.
"""
import argparse
import json
import os
import time

import jax
import jax.numpy as jnp
from rejax import PPO
from rejax.evaluate import evaluate

from rejax_breakout import SETTINGS

# The gymnax MinAtar games rejax can train: rejax 0.1.3 needs gymnax < 1.0, which has no
# Seaquest. Asterix last: its gymnax 0.0.9 step is about 7x slower than Breakout's (2.8k against
# 18.6k env steps/s for one seed here), so the quick games are recorded first.
GAMES = ('Breakout-MinAtar', 'Freeway-MinAtar', 'SpaceInvaders-MinAtar', 'Asterix-MinAtar')


def greedy_evaluation(n_episodes):
  """rejax's evaluation callback with the most probable action instead of a sampled one."""
  def callback(algo, ts, rng):
    def act(obs, unused_rng):
      dist = algo.actor.apply(ts.actor_ts.params, obs[None], method='_action_dist')
      return jnp.squeeze(dist.mode())
    return evaluate(act, rng, algo.env, algo.env_params, n_episodes,
                    algo.env_params.max_steps_in_episode)
  return callback


def train_game(game, args):
  """Every seed of `game`: a list of {game, seed, env_steps, greedy_returns}."""
  settings = dict(SETTINGS, env=game, eval_freq=args.eval_every)
  algo = PPO.create(total_timesteps=args.total_timesteps, **settings)
  algo = algo.replace(eval_callback=greedy_evaluation(args.eval_episodes))
  keys = jnp.stack([jax.random.PRNGKey(seed) for seed in range(args.seeds)])
  start = time.perf_counter()
  _, (_, returns) = jax.block_until_ready(jax.jit(jax.vmap(algo.train))(keys))
  seconds = time.perf_counter() - start
  mean_returns = returns.mean(axis=-1)  # [seed, evaluation]
  steps = [i * args.eval_every for i in range(mean_returns.shape[1])]
  return [{'game': game, 'seed': seed, 'env_steps': steps,
           'greedy_returns': [round(float(r), 3) for r in mean_returns[seed]],
           'wall_seconds_all_seeds': round(seconds, 1)} for seed in range(args.seeds)]


def main():
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument('--games', default=','.join(GAMES))
  parser.add_argument('--seeds', type=int, default=3, help='seeds 0 to N-1')
  parser.add_argument('--total_timesteps', type=int, default=5_000_000)
  parser.add_argument('--eval_every', type=int, default=500_000)
  parser.add_argument('--eval_episodes', type=int, default=32)
  parser.add_argument('--out', required=True, help='JSON lines, one per game and seed')
  args = parser.parse_args()
  done = set()
  if os.path.exists(args.out):
    with open(args.out) as f:
      done = {json.loads(line)['game'] for line in f if line.strip()}
  for game in args.games.split(','):
    if game in done:
      print(f'{game}: in {args.out} already')
      continue
    records = train_game(game, args)
    with open(args.out, 'a') as f:
      f.writelines(json.dumps(record) + '\n' for record in records)
    finals = ', '.join(f"{r['greedy_returns'][-1]:.1f}" for r in records)
    print(f'{game}: final greedy returns {finals} '
          f"({records[0]['wall_seconds_all_seeds']:.0f} s for {args.seeds} seeds)", flush=True)


if __name__ == '__main__':
  main()
