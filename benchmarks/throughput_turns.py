"""The sides that benchmarks/jax_native_throughput.py times, and how their turns pair up.

Each side is called once a turn and keeps the rate (env steps per second) of
each of its turns in `rates`; `Paired` and `rejax_ratios` put a side's turn
between two turns of the one it is compared with, so that every ratio is of
samples seconds apart.
"""
import os
import statistics
import subprocess
import sys
import time

import jax

from benchmarks.ppo_floor import HPARAMS
from benchmarks.ppo_floor import ScanLoop
from benchmarks.ppo_floor import make_ppo
from benchmarks.ppo_floor import seconds

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


class RlRun:
  """`python -m rl.run` of one config, timed as the difference of a short and a long run."""

  def __init__(self, workdir, name, config_file, steps_per_epoch, short, long, n_seeds=1,
               bindings=()):
    self.workdir, self.name, self.config_file = workdir, name, config_file
    self.steps = (long - short) * steps_per_epoch * n_seeds
    self.short, self.long, self.n_seeds, self.bindings = short, long, n_seeds, list(bindings)
    self.rates = []
    self._runs = 0

  def _seconds(self, n_epochs):
    self._runs += 1
    out = os.path.join(self.workdir, f'{self.name}_{self._runs}')
    command = [sys.executable, '-m', 'rl.run', f'--config_file={self.config_file}',
               f'--output_dir={out}', f'--config=train_rl.n_epochs = {n_epochs}']
    command += [f'--config={b}' for b in self.bindings]
    if self.n_seeds > 1:
      command.append(f'--seeds=0-{self.n_seeds - 1}')
    start = time.perf_counter()
    subprocess.run(command, cwd=REPO_ROOT, check=True, stdout=subprocess.DEVNULL)
    return time.perf_counter() - start

  def __call__(self):
    """One turn: the short run, then the long one; keeps the rate of their difference.

    The first turn starts with a run that fills the persistent compilation
    cache, so that both timed runs start alike.
    """
    if not self._runs:
      self._seconds(self.short)
    short = self._seconds(self.short)
    long = self._seconds(self.long)
    self.rates.append(self.steps / (long - short))

  @property
  def rate(self):
    return statistics.median(self.rates)


class Floor:
  """The floor's scan of --updates updates per call (under vmap over `seeds` seeds if > 1),
  timed over about `stretch` updates in a row a turn, as many as rl's runs differ by: on a
  shared machine a side timed in shorter samples, or by its best one, would be timed in the
  machine's quieter moments only."""

  def __init__(self, args, seeds=1, stretch=1000):
    init, update, self.steps_per_update = make_ppo(HPARAMS)
    if seeds == 1:
      state = jax.jit(init)(0)
    else:
      # Each seed initialised alone, then stacked (as rl.run --seeds does).
      one = jax.jit(init)
      state = jax.tree_util.tree_map(lambda *x: jax.numpy.stack(x),
                                     *[one(seed) for seed in range(seeds)])
      update = jax.vmap(update)
    self._loop = ScanLoop(update, state, args.updates)
    self.steps = seeds * args.updates * self.steps_per_update
    self.compile = seconds(self._loop)
    self._calls = 1
    self._per_turn = max(1, round(stretch / args.updates))
    self.rates = []

  def __call__(self):
    """One turn: the calls of one stretch, timed together."""
    start = time.perf_counter()
    for _ in range(self._per_turn):
      self._loop()
    self.rates.append(self._per_turn * self.steps / (time.perf_counter() - start))
    self._calls += self._per_turn

  def learning(self, env_steps):
    """Goes on training to at least `env_steps` steps (one seed): (steps, mean return of the
    episodes ended in the last call), to show that the floor is the real algorithm."""
    while True:
      return_sum, episodes = (float(jax.numpy.sum(x)) for x in self._loop())
      self._calls += 1
      if self._calls * self.steps >= env_steps:
        return self._calls * self.steps, return_sum / max(episodes, 1.0)

  @property
  def rate(self):
    return statistics.median(self.rates)


class Paired:
  """An rl turn between two turns of the floor: each round's ratio of rl's rate to the mean
  of the floor's just before and just after it."""

  def __init__(self, floor, run):
    self._floor, self._run = floor, run
    self.ratios = []

  def __call__(self):
    self._floor()
    self._run()
    self._floor()
    self.ratios.append(ratio_to_around(self._run, self._floor))

  @property
  def ratio(self):
    return statistics.median(self.ratios)


class RejaxRun:
  """rejax's PPO on Breakout at its `breakout_1m` settings (benchmarks/rejax_breakout.py), a
  process a turn: the median rate of its repeats, compilation left out."""

  def __init__(self, python):
    self._command = [python, os.path.join(REPO_ROOT, 'benchmarks', 'rejax_breakout.py')]
    self.rates = []

  def __call__(self):
    out = subprocess.run(self._command, check=True, capture_output=True, text=True).stdout
    self.rates.append(float(out.strip().splitlines()[-1].split()[-1]))

  @property
  def rate(self):
    return statistics.median(self.rates)


def ratio_to_around(side, reference):
  """`side`'s last rate over the mean of `reference`'s last two: its turns just before and
  just after."""
  return side.rates[-1] / statistics.mean(reference.rates[-2:])


def rejax_ratios(rejax, runs, turns):
  """Each of rl's `runs` ({name: RlRun}) a turn between two turns of rejax: {name: each
  turn's ratio of its rate to the mean of rejax's just before and just after}, as the floor's
  rounds (`Paired`)."""
  rejax()
  ratios = {name: [] for name in runs}
  for _ in range(turns):
    for run in runs.values():
      run()
    rejax()
    for name, run in runs.items():
      ratios[name].append(ratio_to_around(run, rejax))
  return ratios
