"""Runs one network Trainer (rl.learner.network_trainer) on its own, as its tests need.

The package only traces a Trainer's `epoch` into an RL trainer's compiled
update; these helpers compile it alone and evaluate a batch under the
trainer's weights, from the Trainer's public pieces (`epoch`, `results`,
`spec`, `state`) and rl.learner.fused_epoch.evaluate_batch.
"""
import functools
import time

import jax

from rl import compiler
from rl.learner.fused_epoch import evaluate_batch


class Epochs:
  """Trains `trainer` one compiled epoch per call, keeping its state in the trainer.

  One jitted function per trainer, so calls of the same shape reuse its
  compiled epoch.
  """

  def __init__(self, trainer):
    self._trainer = trainer
    self._epoch = compiler.jit(trainer.epoch,
                               static_argnames=('n_steps', 'n_chunks', 'n_eval_steps'))

  def __call__(self, data, key, carry=None, n_steps=1, n_chunks=1, n_eval_steps=0):
    """(the epoch's host results, the advanced key, carry); see Trainer.epoch."""
    start = time.perf_counter()
    state, key, carry, result = self._epoch(
        self._trainer.state, data, key, carry, n_steps=n_steps, n_chunks=n_chunks,
        n_eval_steps=n_eval_steps)
    self._trainer.state = state
    return (self._trainer.results(jax.device_get(result), time.perf_counter() - start), key,
            carry)


def evaluate(trainer, batch):
  """The metrics of one given batch under `trainer`'s current weights (floats)."""
  _, metrics = compiler.jit(functools.partial(evaluate_batch, trainer.spec))(trainer.state, batch)
  return {name: float(value) for name, value in jax.device_get(metrics).items()}
