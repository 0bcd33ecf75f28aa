"""Runs one network Trainer (rl.learner.network_trainer) on its own, as its tests need.

The package only traces a network's gradient steps into an algorithm's
compiled update (rl.learner.fused_epoch); these helpers compile one
network's epoch alone, with a loss on its output and the batches of a test,
and evaluate a batch under the network's weights.
"""
import time

import jax

from rl import compiler
from rl.learner.fused_epoch import epoch_result
from rl.learner.fused_epoch import fused_epoch
from rl.learner.fused_epoch import gradient_step
from rl.learner.fused_epoch import variables_of


class Epochs:
  """Trains `trainer` one compiled epoch per call, keeping its state in the trainer.

  loss_fn(model output, batch) -> (loss, metrics); draw(data, key) and
  take(data, drawn) pick a batch's rows, make(rows, key, carry) makes the
  batch; after_step(carry, variables, step) -> carry runs after every update.
  One jitted function per trainer, so calls of the same shape reuse its
  compiled epoch.
  """

  def __init__(self, trainer, loss_fn, draw, take, make, after_step=None):
    self._trainer = trainer

    def loss(variables, batch):
      return loss_fn(trainer.model.apply(variables, batch[0]), batch)

    def step(loop, rows, key):
      net, carry = loop
      net, stepped = gradient_step(trainer.tx, net, loss, make(rows, key, carry))
      if after_step is not None:
        carry = after_step(carry, variables_of(net), net['step'])
      return (net, carry), {'net': stepped}

    def evaluate(loop, rows, key):
      net, carry = loop
      return {'net': loss(variables_of(net), make(rows, key, carry))[1]}

    def epoch(net, data, key, carry, n_steps, n_chunks, n_eval_steps):
      (net, carry), key, records = fused_epoch(
          step, (net, carry), data, key, draw=draw, take=take, n_chunks=n_chunks,
          steps_per_chunk=n_steps // n_chunks, evaluate=evaluate, n_eval_steps=n_eval_steps,
          batch_sharding=trainer.batch_sharding)
      return net, key, carry, epoch_result(records['net'], net, trainer.lr_schedule)
    self._epoch = compiler.jit(epoch, static_argnames=('n_steps', 'n_chunks', 'n_eval_steps'))
    self._loss = compiler.jit(loss)

  def raw(self, data, key, carry=None, n_steps=1, n_chunks=1, n_eval_steps=0):
    """(state, key, carry, EpochResult) of one epoch from the trainer's state, left as it is."""
    return self._epoch(self._trainer.state, data, key, carry, n_steps=n_steps,
                       n_chunks=n_chunks, n_eval_steps=n_eval_steps)

  def __call__(self, data, key, carry=None, n_steps=1, n_chunks=1, n_eval_steps=0):
    """(the epoch's host results, the advanced key, carry)."""
    start = time.perf_counter()
    state, key, carry, result = self.raw(data, key, carry, n_steps, n_chunks, n_eval_steps)
    self._trainer.state = state
    return (self._trainer.results(jax.device_get(result), time.perf_counter() - start), key,
            carry)

  def evaluate(self, batch):
    """The metrics of one given batch under the trainer's current weights (floats)."""
    _, metrics = self._loss(self._trainer.variables, batch)
    return {name: float(value) for name, value in jax.device_get(metrics).items()}
