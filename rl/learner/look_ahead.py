"""Look-ahead dispatch of JAX-native epochs.

JAX runs a compiled call asynchronously, so the next epoch (a pure function of
this one's outputs and the epoch number) can start on the device while the
host reads this one's metrics, logs and checkpoints, instead of the two taking
turns. The numbers are those of calling the epochs one by one.

An epoch that evaluates dispatches the next one once its evaluation is
dispatched (`Learner.evaluate`'s `then`): the evaluation is a program on the
same device, so the next epoch runs straight after it, while the host reads
the returns and books the epoch; dispatched before it, the next epoch would
make the evaluation wait.
"""
from typing import NamedTuple

import jax

from rl import compiler


class _Ahead(NamedTuple):
  """An epoch dispatched before its turn."""
  epoch: int
  inputs: list  # the arrays it started from
  outputs: tuple  # jax_epoch's outputs (futures until read)


def _same_arrays(a, b):
  """Whether two lists hold the very same array objects."""
  return len(a) == len(b) and all(x is y for x, y in zip(a, b))


class LookAhead:
  """Runs a Learner's `jax_epoch`s, each next one dispatched while the current one is booked."""

  def __init__(self, learner):
    self._learner = learner
    self._jitted = None
    self.pending = None  # the _Ahead epoch on its way, if any

  def _dispatch(self, epoch):
    """Starts `jax_epoch` of `epoch` from the learner's current state; returns its futures."""
    learner = self._learner
    if self._jitted is None:
      self._jitted = compiler.jit(learner.jax_epoch, static_argnames='n_steps')
    return self._jitted(learner.train_state, learner.task.carry, *learner.epoch_args(epoch),
                        n_steps=learner.jax_epoch_steps)

  def _inputs(self):
    """The arrays the next `jax_epoch` call would start from (its inputs' identity)."""
    learner = self._learner
    return jax.tree_util.tree_leaves((learner.train_state, learner.task.carry))

  def outputs(self, dispatch_next=True):
    """This epoch's `jax_epoch` outputs, with the next epoch already dispatched if `dispatch_next`.

    The epoch dispatched ahead is used only if the state it started from is
    still the learner's (the same arrays: nothing restored or replaced it
    since); otherwise, and after the last epoch, it is dropped.
    """
    learner = self._learner
    ahead, self.pending = self.pending, None
    if (ahead is not None and ahead.epoch == learner.epoch
        and _same_arrays(ahead.inputs, self._inputs())):
      outputs = ahead.outputs
    else:
      outputs = self._dispatch(learner.epoch)  # run_epoch has counted this epoch already
    # The learner moves to this epoch's state before the next call starts, so
    # the previous epoch's arrays are freed rather than held alongside two others.
    learner.train_state, learner.task.carry = outputs[0], outputs[1]
    if dispatch_next:
      self.ahead()
    return outputs

  def ahead(self):
    """Dispatches the epoch after the learner's current one, from its current state, unless
    the current one is the run's last or the next is on its way already."""
    learner = self._learner
    if (self.pending is None and learner.last_epoch is not None
        and learner.epoch < learner.last_epoch):
      self.pending = _Ahead(learner.epoch + 1, self._inputs(), self._dispatch(learner.epoch + 1))
