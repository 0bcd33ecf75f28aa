"""JAX-native epochs several to a compiled call, each call dispatched ahead of its turn.

JAX runs a compiled call asynchronously, so the next epochs (a pure function
of the current ones' outputs and their epoch numbers) can run on the device
while the host reads the current ones' metrics, logs and checkpoints,
instead of the two taking turns. One call runs up to `EPOCHS_PER_CALL`
epochs in a loop (`epochs_program`), which pays a call's dispatch once for
them all and gives the host a whole call's time to book them: a checkpoint's
write, a few times an epoch's length, then hides behind the next call.

A call ends at every epoch whose booking reads the learner's state (an
evaluation, a checkpoint, the run's last epoch: `Learner.reads_state`), and
the process's first call runs one epoch, so that its time is compiling and
one epoch. An evaluating call's evaluation is dispatched straight behind it
and the next call behind that, so the device runs them back to back. The
numbers are those of calling the epochs one by one, whatever the calls'
lengths (tests/test_jax_epoch_dispatch.py).
"""
import time
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from rl import compiler
from rl import metrics as metrics_lib

# The most epochs one call runs. A call's outputs (every epoch's metrics and
# episode returns) are this many times an epoch's; Ctrl-C waits for the
# call under way.
EPOCHS_PER_CALL = 10


def epochs_program(jax_epoch, n_steps, capacity=EPOCHS_PER_CALL):
  """The pure function that runs `n` (traced, at most `capacity`) epochs of `jax_epoch` in a loop.

  (state, carry, sample_args, epochs, n) -> (state, carry, outputs): each of
  sample_args and epochs has a leading axis of `capacity` epochs, of which
  the first n run; outputs are `jax_epoch`'s other outputs with that axis
  (rows from n on are zeros). One program serves every call's length.
  """
  def run(state, carry, sample_args, epochs, n):
    def at(tree, i):
      return jax.tree_util.tree_map(lambda x: x[i], tree)

    shapes = jax.eval_shape(lambda s, c, a, e: jax_epoch(s, c, a, e, n_steps)[2:],
                            state, carry, at(sample_args, 0), epochs[0])
    stacked = jax.tree_util.tree_map(lambda s: jnp.zeros((capacity,) + s.shape, s.dtype), shapes)

    def one_epoch(i, loop_carry):
      state, carry, stacked = loop_carry
      state, carry, *outputs = jax_epoch(state, carry, at(sample_args, i), epochs[i], n_steps)
      stacked = jax.tree_util.tree_map(lambda rows, x: rows.at[i].set(x), stacked,
                                       tuple(outputs))
      return state, carry, stacked
    return jax.lax.fori_loop(0, n, one_epoch, (state, carry, stacked))
  return run


def call_inputs(epoch_args, first, n, capacity=EPOCHS_PER_CALL):
  """(sample_args, epochs) of a call of epochs first .. first + n - 1, padded to `capacity`
  with the last epoch's; epoch_args(epoch) gives one epoch's (sample_args, epoch)."""
  rows = [epoch_args(first + min(i, n - 1)) for i in range(capacity)]
  return jax.tree_util.tree_map(lambda *x: np.stack(x), *rows)


def call_length(first, last_epoch, reads_state, capacity=EPOCHS_PER_CALL):
  """Epochs in a call starting at epoch `first`: up to the first epoch whose booking reads the
  state (`reads_state(epoch)`), the run's last, or `capacity`."""
  n = 1
  while n < capacity and first + n - 1 < last_epoch and not reads_state(first + n - 1):
    n += 1
  return n


def epoch_rows(outputs, i):
  """Epoch i's outputs (results, extra, (returns, ended), n_segments) of a call's stacked
  outputs, read back already."""
  return jax.tree_util.tree_map(lambda x: x[i], outputs)


class Taken(NamedTuple):
  """One epoch of a call, as `LookAhead.take` hands it to the learner."""
  outputs: tuple  # (state, carry, results, extra, (returns, ended), n_segments); state and
  # carry are the call's final ones at its last epoch, else None
  seconds: float  # the epoch's share of the call's time
  evaluation: tuple  # (eval metrics, seconds) after the call's last epoch, or None


class _Read(NamedTuple):
  """A call read back, being booked epoch by epoch."""
  call: '_Call'
  outputs: tuple  # the call's stacked outputs, read back
  seconds: float  # each epoch's share of the call's time
  evaluation: tuple  # (eval metrics, seconds) after its last epoch, or None


class _Call(NamedTuple):
  """A call dispatched, not yet read."""
  first: int  # its first epoch
  n: int  # how many epochs it runs
  inputs: list  # the arrays it started from
  outputs: tuple  # (state, carry, stacked outputs), futures until read
  played: dict  # {temperature: eval returns future} after its last epoch, or None


class LookAhead:
  """Runs a Learner's JAX-native epochs in calls, each next call dispatched as the current one
  is read."""

  def __init__(self, learner):
    self._learner = learner
    self._program = None
    self.pending = None  # the _Call on its way, not read yet
    self.current = None  # the _Read call being booked
    self._read_at = None  # perf_counter time the last call's read (and evaluation) ended

  def _dispatch(self, first, n, state, carry):
    """Starts epochs first .. first + n - 1 from (state, carry), and the evaluation after the
    last of them if it evaluates; returns the _Call."""
    learner = self._learner
    if self._program is None:
      self._program = compiler.jit(epochs_program(learner.jax_epoch, learner.jax_epoch_steps))
    inputs = jax.tree_util.tree_leaves((state, carry))
    outputs = self._program(state, carry, *call_inputs(learner.epoch_args, first, n),
                            np.int32(n))
    last = first + n - 1
    played = (learner.play_evaluation(outputs[0], last)
              if learner.evaluates(last) and learner.evaluates_alone else None)
    return _Call(first, n, inputs, outputs, played)

  def _inputs(self):
    """The arrays the next call would start from (its inputs' identity)."""
    learner = self._learner
    return jax.tree_util.tree_leaves((learner.train_state, learner.task.carry))

  def _length(self, first):
    learner = self._learner
    if learner.last_epoch is None or self._program is None:
      return 1  # epochs run one by one; the process's first call compiles
    return call_length(first, learner.last_epoch, learner.reads_state)

  def take(self, epoch, start):
    """Epoch `epoch`'s Taken: its call is read when its first epoch is taken, once the call
    after it is dispatched. start: perf_counter time the epoch's booking began (the first
    call's time counts from it)."""
    learner = self._learner
    read = self.current
    if not (read is not None and read.call.first <= epoch < read.call.first + read.call.n
            and _same_arrays(read.call.inputs, self._inputs())):
      # The epoch starts a call (or the learner's state was replaced, by a restore).
      read = self._read_next(epoch, start)
    call, host, seconds, evaluation = read
    i = epoch - call.first
    last = i == call.n - 1
    state = call.outputs[:2] if last else (None, None)
    if last:
      # The learner holds the state its current call started from until the call's last epoch.
      learner.train_state, learner.task.carry = call.outputs[0], call.outputs[1]
      self.current = None
    return Taken(state + epoch_rows(host, i), seconds, evaluation if last else None)

  def _read_next(self, epoch, start):
    learner = self._learner
    call, self.pending = self.pending, None
    if call is None or call.first != epoch or not _same_arrays(call.inputs, self._inputs()):
      call = self._dispatch(epoch, self._length(epoch), learner.train_state, learner.task.carry)
    last = call.first + call.n - 1
    if learner.last_epoch is not None and last < learner.last_epoch:
      # The next call starts from this one's outputs, before they are read.
      self.pending = self._dispatch(last + 1, self._length(last + 1), *call.outputs[:2])
    begun = start if self._read_at is None else min(start, self._read_at)
    host = jax.device_get(call.outputs[2])
    read = time.perf_counter()
    evaluation = None
    if call.played is not None:
      returns = jax.device_get(call.played)
      self._read_at = time.perf_counter()
      evaluation = (metrics_lib.eval_metrics(returns), self._read_at - read)
    else:
      self._read_at = read
    self.current = _Read(call, host, (read - begun) / call.n, evaluation)
    return self.current


def _same_arrays(a, b):
  """Whether two lists hold the very same array objects."""
  return len(a) == len(b) and all(x is y for x, y in zip(a, b))
