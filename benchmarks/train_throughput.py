"""Gradient steps per second of the trainers' epochs against a bare jitted scan.

For each of PPO (its policy network), DQN and PPOJoint, built from the shipped
CartPole config after a few epochs of collection, two loops run in one
process, interleaved, at the config's gradient steps per epoch:
  epoch: what rl.run does for the network every epoch: the task's SliceData
         for the epoch, then the trainer's fused call (per-chunk preparation,
         on-device batch sampling, the updates, the metrics), with results
         read back to the host;
  floor: a jitted `lax.scan` of value_and_grad of the same loss, the same
         optax transformation and model, on one fixed batch of the same shape
         drawn beforehand: no sampling, no preparation, no host work.
The ratio epoch/floor (steps per second) says what the runner's epoch costs
on top of the arithmetic of its updates; the last line is the smallest ratio.

Usage: python benchmarks/train_throughput.py [--repeats 30] [--trainers ppo,dqn,ppo_joint]
"""
import argparse
import functools
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import gin  # noqa: E402
import jax  # noqa: E402
import optax  # noqa: E402

from rl import run as run_lib  # noqa: E402,F401  (registers the configurables)
from rl import keys as rl_keys  # noqa: E402
from rl import slices  # noqa: E402
from rl.task import RLTask  # noqa: E402

CONFIG_DIR = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                          'configs')

# name -> (config file, the supervised network timed, epochs collected first)
TRAINERS = {
    'ppo': ('ppo_cartpole.gin', 'policy', 4),
    'dqn': ('dqn_cartpole.gin', 'value', 8),
    'ppo_joint': ('ppo_joint_cartpole.gin', 'joint', 4),
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
  trainer.collect_initial()
  for epoch in range(1, n_epochs + 1):
    trainer.epoch = epoch
    trainer.run_epoch()
  return trainer


class EpochLoop:
  """The trainer's own train_epoch call for network `name`, as rl.run makes it."""

  def __init__(self, trainer, name):
    self._trainer = trainer
    self._name = name

  def __call__(self):
    supervised = self._trainer._trainers[self._name]  # pylint: disable=protected-access
    before = supervised.step
    if self._name == 'policy':
      self._trainer._train_policy()  # pylint: disable=protected-access
    else:
      self._trainer.train_epoch()
    jax.block_until_ready(supervised.model_weights)
    return supervised.step - before


def floor_inputs(trainer, name, n_steps):
  """(n_steps stacked inputs, per-step batch function) of the floor.

  The inputs are drawn beforehand exactly as the epoch draws them, one per
  step, so the floor does every step's own arithmetic (nothing about a step
  is loop-invariant for the compiler to hoist) but none of the drawing. It
  keeps what every implementation of the algorithm does per gradient step:
  DQN's TD targets come from the target network on each step's
  transitions, so its floor computes them from the drawn transitions; PPO's
  advantages are computed once per rollout (here: once per epoch, in the
  trainer's preparation), so its floor trains on drawn batches.
  """
  supervised = trainer._trainers[name]  # pylint: disable=protected-access
  spec = supervised.spec
  keys = jax.random.split(rl_keys.seed_key(0), n_steps)
  if name == 'value':  # DQN
    target = supervised.variables
    sample = functools.partial(
        slices.sample, batch_size=trainer._value_batch_size,  # pylint: disable=protected-access
        window=trainer._max_slice_length, margin=trainer._margin)  # pylint: disable=protected-access
    fields = jax.jit(jax.vmap(sample, in_axes=(None, 0)))(trainer.task.slice_data(), keys)
    return fields, lambda fields, variables: trainer.td_batch(fields, target, variables)
  carry = getattr(trainer, '_target', None) if name == 'policy' else None
  data = (trainer.policy_data() if name == 'policy'
          else trainer.task.slice_data([-1] if getattr(trainer, 'on_policy', False) else None))
  if spec.prepare_fn is not None:
    data = jax.jit(spec.prepare_fn)(data, keys[0], carry)
  draw = jax.vmap(lambda key: spec.batch_fn(data, key, carry, supervised.variables))
  return jax.jit(draw)(keys), lambda batch, variables: batch


class FloorLoop:
  """A bare jitted scan of the same loss and optimizer on batches drawn beforehand."""

  def __init__(self, trainer, name, n_steps):
    supervised = trainer._trainers[name]  # pylint: disable=protected-access
    spec = supervised.spec
    inputs, per_step = floor_inputs(trainer, name, n_steps)
    self._inputs = inputs
    self._state = supervised._state  # pylint: disable=protected-access
    self._n_steps = n_steps

    def loss(params, model_state, batch):
      out = spec.apply_fn({'params': params, **model_state}, *spec.inputs_fn(batch))
      return spec.loss_fn(out, batch)

    def step(state, x):
      batch = per_step(x, {'params': state['params'], **state['model_state']})
      (value, _), grads = jax.value_and_grad(loss, has_aux=True)(
          state['params'], state['model_state'], batch)
      updates, opt_state = spec.tx.update(grads, state['opt_state'], state['params'])
      params = optax.apply_updates(state['params'], updates)
      return dict(state, params=params, opt_state=opt_state), value

    @jax.jit
    def scan(state, inputs):
      return jax.lax.scan(step, state, inputs)

    self._scan = scan

  def __call__(self):
    self._state, values = self._scan(self._state, self._inputs)
    jax.block_until_ready(values)
    return self._n_steps


def steps_per_second(loop):
  start = time.perf_counter()
  n = loop()
  return n / (time.perf_counter() - start)


def main():
  args = _parse_args()
  ratios = {}
  for name in args.trainers:
    config, network, n_epochs = TRAINERS[name]
    trainer = build(config, n_epochs)
    supervised = trainer._trainers[network]  # pylint: disable=protected-access
    n_steps = supervised.step // n_epochs
    epoch, floor = EpochLoop(trainer, network), FloorLoop(trainer, network, n_steps)
    epoch(), floor()  # compile both
    epoch_rates, floor_rates = [], []
    for _ in range(args.repeats):  # interleaved: load changes hit both alike
      epoch_rates.append(steps_per_second(epoch))
      floor_rates.append(steps_per_second(floor))
    e, f = statistics.median(epoch_rates), statistics.median(floor_rates)
    ratios[name] = e / f
    print(f'{name} ({config}, {network} network, {n_steps} steps per epoch): '
          f'epoch {e:,.0f} steps/s, floor {f:,.0f} steps/s, ratio {e / f:.2f}')
    trainer.close()
  worst = min(ratios, key=ratios.get)
  print(f'(smallest: {worst}; machine: {os.cpu_count()} cores, medians of {args.repeats})')
  print(f'train/floor ratio: {ratios[worst]:.2f}')


if __name__ == '__main__':
  main()
