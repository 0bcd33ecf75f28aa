"""Gradient steps per second of the trainers' epochs against a bare jitted scan.

For each of PPO, DQN and PPOJoint, built from the shipped CartPole config
after a few epochs of collection, two loops run in one process, interleaved,
at the config's gradient steps per epoch:
  epoch: what rl.run does every epoch: the task's SliceData for the epoch,
         then the trainer's one compiled `update` (every network's fused
         epoch: per-chunk preparation, on-device batch sampling, the
         updates, the metrics), with the results read back to the host;
  floor: for each network `update` trains, in the same order, a `lax.scan`
         of value_and_grad of the same loss with the same optax
         transformation and model, on batches drawn beforehand from the data
         `update` gives that network: no sampling, no preparation, no host
         work; all the networks' scans in one jitted call.
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
import optax  # noqa: E402

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


class Fit(NamedTuple):
  """What `update` hands one network's fused epoch (RLTrainer.fit's arguments)."""
  name: str
  data: Any
  carry: Any
  n_steps: int


def recorded_fits(trainer):
  """The Fits of one `update` call on this epoch's data, in the order it makes them.

  `update` is traced with `fit` wrapped to return each call's data and carry
  as outputs besides; the traced call runs once, and the trainer's state is
  left as it was.
  """
  names = []

  def update(state, data):
    fits = []
    fit = trainer.fit

    def recording_fit(state, name, data, n_steps, n_chunks=1, n_eval_steps=0, carry=None):
      names.append((name, n_steps))
      fits.append((data, carry))
      return fit(state, name, data, n_steps, n_chunks, n_eval_steps, carry)
    trainer.fit = recording_fit
    try:
      trainer.update(state, data)
    finally:
      del trainer.fit  # the instance attribute; the class's method shows again
    return fits

  outputs = compiler.jit(update)(trainer.learner.train_state, trainer.epoch_data(trainer.epoch))
  return [Fit(name, data, carry, n_steps)
          for (name, n_steps), (data, carry) in zip(names, outputs)]


def floor_inputs(trainer, fit):
  """(fit.n_steps stacked inputs, per-step batch function) of one network's floor.

  The slices are drawn and gathered beforehand exactly as the epoch draws
  them, one draw per step with that step's key, so the floor does every
  step's own arithmetic (nothing about a step is loop-invariant for the
  compiler to hoist) but none of the drawing. It keeps what every
  implementation of the algorithm does per gradient step: the batch made
  from the slices' rows (DQN's TD targets come from the target network on
  each step's transitions); PPO's advantages are computed once per rollout
  (here: once per epoch, in the trainer's preparation).
  """
  spec = trainer.learner.networks[fit.name].spec  # pylint: disable=protected-access
  batch_keys = jax.random.split(rl_keys.seed_key(0), fit.n_steps)
  data = fit.data
  if spec.prepare_fn is not None:
    data = compiler.jit(spec.prepare_fn)(data, batch_keys[0], fit.carry)

  @compiler.jit
  def rows_of(data, batch_keys):
    # Each step's rows from its own key, one step after the other, as the trainer draws them.
    return jax.lax.map(lambda key: spec.batches.take(data, spec.batches.draw(data, key)),
                       batch_keys)
  inputs = (batch_keys, rows_of(data, batch_keys))
  carry = fit.carry

  def batch_of(step_inputs, variables):
    key, rows = step_inputs
    return spec.batches.make(data, rows, key, carry, variables)
  return inputs, batch_of


class FloorLoop:
  """Bare jitted scans of the same losses and optimizers on batches drawn beforehand."""

  def __init__(self, trainer):
    fits = recorded_fits(trainer)
    specs = [trainer.learner.networks[fit.name].spec for fit in fits]  # pylint: disable=protected-access
    per_step = []
    self._inputs = []
    for fit in fits:
      inputs, batch_of = floor_inputs(trainer, fit)
      self._inputs.append(inputs)
      per_step.append(batch_of)
    self._states = [trainer.learner.networks[fit.name].state for fit in fits]  # pylint: disable=protected-access
    self._n_steps = sum(fit.n_steps for fit in fits)

    def network_scan(spec, batch_of, state, inputs):
      def loss(params, model_state, batch):
        out = spec.apply_fn({'params': params, **model_state}, *spec.inputs_fn(batch))
        return spec.loss_fn(out, batch)

      def step(state, x):
        batch = batch_of(x, {'params': state['params'], **state['model_state']})
        (value, _), grads = jax.value_and_grad(loss, has_aux=True)(
            state['params'], state['model_state'], batch)
        updates, opt_state = spec.tx.update(grads, state['opt_state'], state['params'])
        params = optax.apply_updates(state['params'], updates)
        return dict(state, params=params, opt_state=opt_state), value
      return jax.lax.scan(step, state, inputs)

    @compiler.jit
    def scans(states, inputs):
      return [network_scan(spec, batch_of, state, x)
              for spec, batch_of, state, x in zip(specs, per_step, states, inputs)]

    self._scans = scans

  def __call__(self):
    outputs = self._scans(self._states, self._inputs)
    self._states = [state for state, _ in outputs]
    jax.block_until_ready([values for _, values in outputs])
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
