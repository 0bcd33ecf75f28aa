"""Gradient steps per second of the trainers' epochs against a bare jitted scan.

For each of PPO, DQN and PPOJoint, built from the shipped CartPole config
after a few epochs of collection, two loops run in one process, interleaved,
at the config's gradient steps per epoch:
  epoch: what rl.run does every epoch: the task's SliceData for the epoch,
         then the trainer's one compiled `update` (every network's fused
         epoch: per-chunk preparation, on-device batch sampling, the
         updates, the metrics), with the results read back to the host;
  floor: for each `fused_epoch` call of `update`, in the same order, a
         `lax.scan` of the algorithm's own gradient step (the same batch,
         loss, optax transformation and model) on batches drawn beforehand
         from the data `update` hands it: no sampling, no preparation, no
         summaries, no host work; all the scans in one jitted call.
Steps count every network's (PPO: its value and its policy steps). The ratio
epoch/floor (steps per second) says what the runner's epoch costs on top of
the arithmetic of its updates; the last line is the smallest ratio.

Usage: python benchmarks/train_throughput.py [--repeats 30] [--trainers ppo,dqn,ppo_joint]
"""
import argparse
import os
import statistics
import sys
import time
from typing import Any, NamedTuple

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import gin  # noqa: E402
import jax  # noqa: E402

from rl import compiler  # noqa: E402
from rl import cpu_client  # noqa: E402
from rl import keys as rl_keys  # noqa: E402
from rl import experiment  # noqa: E402,F401  (registers the configurables)
from rl.envs.task import RLTask  # noqa: E402

CONFIG_DIR = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                          'configs')

# name -> (config file, epochs collected first)
TRAINERS = {
    'ppo': ('ppo_cartpole.gin', 4),
    'dqn': ('dqn_cartpole.gin', 8),
    'ppo_joint': ('ppo_joint_cartpole.gin', 4),
}


def _parse_args():
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument('--repeats', type=int, default=30,
                      help='timed epochs of each loop; the median is reported')
  parser.add_argument('--trainers', default=','.join(TRAINERS),
                      help=f"comma-separated subset of {', '.join(TRAINERS)}")
  args = parser.parse_args()
  names = [n for n in args.trainers.split(',') if n]
  unknown = sorted(set(names) - set(TRAINERS))
  if unknown or not names:
    parser.error(f"--trainers: unknown {', '.join(unknown) or '(none given)'}; "
                 f"pick from {', '.join(TRAINERS)}")
  if args.repeats < 1:
    parser.error('--repeats must be >= 1')
  args.trainers = names
  return args


def build(config, n_epochs):
  """A trainer from `config` with `n_epochs` epochs of data collected."""
  gin.clear_config()
  gin.parse_config_files_and_bindings([os.path.join(CONFIG_DIR, config)], [])
  trainer_class = gin.query_parameter('train_rl.trainer_class').scoped_configurable_fn
  task = RLTask()
  trainer = trainer_class(task=task)
  trainer.learner.collect_initial()
  for epoch in range(1, n_epochs + 1):
    trainer.learner.epoch = epoch
    trainer.learner.run_epoch()
  return trainer


def total_steps(trainer):
  """Optimizer steps taken so far, summed over the trainer's networks."""
  return sum(t.step for t in trainer.learner.networks.values())  # pylint: disable=protected-access


class EpochLoop:
  """The trainer's own train_epoch call, as rl.run makes it every epoch.

  The steps an epoch takes are counted on the first (compiling) call only:
  reading a network's step count back from the device is a sync per
  network that rl.run never makes, so the timed calls return that count;
  `check` makes sure afterwards that every call took as many.
  """

  def __init__(self, trainer):
    self._trainer = trainer
    self._calls = 0
    self._start = self._n_steps = None

  def __call__(self):
    if self._n_steps is None:
      self._start = total_steps(self._trainer)
      self._trainer.learner.train_epoch()
      self._n_steps = total_steps(self._trainer) - self._start
    else:
      self._trainer.learner.train_epoch()
    self._calls += 1
    return self._n_steps

  def check(self):
    taken = total_steps(self._trainer) - self._start
    if taken != self._calls * self._n_steps:
      raise RuntimeError(f'{self._calls} epochs took {taken} steps, not {self._n_steps} each')


class Phase(NamedTuple):
  """One `fused_epoch` call of `update`: its step and how its batches are drawn."""
  step: Any
  draw: Any
  take: Any
  prepare: Any
  n_steps: int


def recorded_phases(trainer):
  """The Phases of one `update` call, in the order it makes them, with each one's (carry,
  data) as `update` hands them over.

  `update` is traced once with its module's `fused_epoch` wrapped to record
  each call's arguments and return its carry and data as outputs besides; the
  trainer's state is left as it was, and the module's `fused_epoch` restored.
  """
  module = sys.modules[type(trainer).update.__module__]
  original = module.fused_epoch
  phases, given = [], []

  def recording(step, carry, data, key, *, draw, take, n_chunks, steps_per_chunk,
                prepare=None, **kwargs):
    phases.append(Phase(step, draw, take, prepare, n_chunks * steps_per_chunk))
    given.append((carry, data))
    return original(step, carry, data, key, draw=draw, take=take, n_chunks=n_chunks,
                    steps_per_chunk=steps_per_chunk, prepare=prepare, **kwargs)

  def update(state, data):
    trainer.update(state, data)
    return list(given)
  module.fused_epoch = recording
  try:
    outputs = compiler.jit(update)(trainer.learner.train_state,
                                   trainer.epoch_data(trainer.epoch))
  finally:
    module.fused_epoch = original
  return list(zip(phases, outputs))


def floor_inputs(phase, carry, data):
  """The phase's n_steps (rows, key) of every step, drawn beforehand.

  The slices are drawn and gathered exactly as the epoch draws them, one draw
  per step with that step's key, so the floor does every step's own
  arithmetic (nothing about a step is loop-invariant for the compiler to
  hoist) but none of the drawing. It keeps what every implementation of the
  algorithm does per gradient step: the batch made from the slices' rows
  (DQN's TD targets come from the target network on each step's
  transitions); PPO's advantages are computed once per rollout (here: once
  per epoch, in the trainer's preparation).
  """
  batch_keys = jax.random.split(rl_keys.seed_key(0), phase.n_steps)
  if phase.prepare is not None:
    data = compiler.jit(phase.prepare)(carry, data, batch_keys[0])

  @compiler.jit
  def rows_of(data, batch_keys):
    # Each step's rows from its own key, one step after the other, as the trainer draws them.
    return jax.lax.map(lambda key: phase.take(data, phase.draw(data, key)), batch_keys)
  return rows_of(data, batch_keys), batch_keys


class FloorLoop:
  """Bare jitted scans of the algorithm's own gradient steps on batches drawn beforehand."""

  def __init__(self, trainer):
    recorded = recorded_phases(trainer)
    phases = [phase for phase, _ in recorded]
    self._carries = [carry for _, (carry, _) in recorded]
    self._inputs = [floor_inputs(phase, carry, data) for phase, (carry, data) in recorded]
    self._n_steps = sum(phase.n_steps for phase in phases)

    def phase_scan(phase, carry, inputs):
      def step(carry, x):
        rows, key = x
        carry, stepped = phase.step(carry, rows, key)
        return carry, [s.loss for s in stepped.values()]
      return jax.lax.scan(step, carry, inputs)

    @compiler.jit
    def scans(carries, inputs):
      return [phase_scan(phase, carry, x) for phase, carry, x in zip(phases, carries, inputs)]

    self._scans = scans

  def __call__(self):
    outputs = self._scans(self._carries, self._inputs)
    self._carries = [carry for carry, _ in outputs]
    jax.block_until_ready([losses for _, losses in outputs])
    return self._n_steps


def steps_per_second(loop):
  start = time.perf_counter()
  n = loop()
  return n / (time.perf_counter() - start)


def main():
  args = _parse_args()
  # As rl.run runs these configs (host envs): computations run inline (rl.cpu_client).
  cpu_client.choose_dispatch(inline=True)
  ratios = {}
  for name in args.trainers:
    config, n_epochs = TRAINERS[name]
    trainer = build(config, n_epochs)
    epoch, floor = EpochLoop(trainer), FloorLoop(trainer)
    n_steps = epoch()  # compiles both
    floor()
    epoch_rates, floor_rates = [], []
    for _ in range(args.repeats):  # interleaved: load changes hit both alike
      epoch_rates.append(steps_per_second(epoch))
      floor_rates.append(steps_per_second(floor))
    epoch.check()
    e, f = statistics.median(epoch_rates), statistics.median(floor_rates)
    ratios[name] = e / f
    networks = '+'.join(trainer.learner.networks)  # pylint: disable=protected-access
    print(f'{name} ({config}, {networks}, {n_steps} steps per epoch): '
          f'epoch {e:,.0f} steps/s, floor {f:,.0f} steps/s, ratio {e / f:.2f}')
    trainer.close()
  worst = min(ratios, key=ratios.get)
  print(f'(smallest: {worst}; machine: {os.cpu_count()} cores, medians of {args.repeats})')
  print(f'train/floor ratio: {ratios[worst]:.2f}')


if __name__ == '__main__':
  main()
