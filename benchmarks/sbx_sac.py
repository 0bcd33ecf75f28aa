"""SBX's SAC on HalfCheetah-v5 at the RL Zoo's MuJoCo settings: env steps/s once it learns.

Run with the Python of a separate virtual environment that has SBX
(`pip install sbx-rl 'gymnasium[mujoco]'`); SBX is not a dependency of rl.
benchmarks/sac_floor.py runs it beside rl's SAC with `--sbx_python`.
Prints one line: `sbx env steps/s: X`.

  /path/to/sbx-venv/bin/python benchmarks/sbx_sac.py [--steps 3000]
"""
import argparse
import time

import gymnasium as gym
from sbx import SAC
from stable_baselines3.common.callbacks import BaseCallback

LEARNING_STARTS = 1000


class Clock(BaseCallback):
  """The wall time at the first learning step and at the end."""

  def __init__(self):
    super().__init__()
    self.start = None

  def _on_step(self):
    if self.start is None and self.num_timesteps > LEARNING_STARTS + 100:
      self.start, self.start_steps = time.perf_counter(), self.num_timesteps  # compiled by now
    return True


def main():
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument('--steps', type=int, default=3000, help='env steps timed while learning')
  args = parser.parse_args()
  # The Zoo's MuJoCo SAC is SB3's defaults (SBX's are the same: learning rate 3e-4, batch 256,
  # (256, 256) networks, one gradient step per env step); learning_starts is lowered so the
  # timed steps all learn.
  model = SAC('MlpPolicy', gym.make('HalfCheetah-v5'), learning_starts=LEARNING_STARTS,
              buffer_size=1_000_000, seed=0)
  clock = Clock()
  model.learn(total_timesteps=LEARNING_STARTS + 100 + args.steps, callback=clock)
  seconds = time.perf_counter() - clock.start
  print(f'sbx env steps/s: {(model.num_timesteps - clock.start_steps) / seconds:.1f}')


if __name__ == '__main__':
  main()
