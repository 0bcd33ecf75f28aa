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

`LookAhead` is the one driver of single runs and of `--seeds` batches: a
batch (rl.seeds.Seeds) runs the same program under jax.vmap over its seeds'
stacked states, each seed at its own epoch numbers; `One` and `Seeds` hold
what differs (the program, where a call's state comes from, who plays the
evaluation and how each learner's share of a call is handed over).
"""
import collections
import time
from typing import Any, NamedTuple

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


class Call(NamedTuple):
  """A call dispatched, not yet read."""
  firsts: list  # each learner's first epoch in it
  n: int  # how many epochs it runs (of every learner)
  inputs: list  # the arrays it started from
  outputs: tuple  # (state, carry, stacked outputs), futures until read
  played: Any  # the evaluation after its last epochs (futures), or None
  evaluating: list  # the learners (indices) whose evaluation `played` holds


class Read(NamedTuple):
  """A call read back, being booked epoch by epoch."""
  call: Call
  host: tuple  # the call's stacked outputs, read back
  seconds: float  # each epoch's share of the call's time
  evaluations: dict  # {learner index: (eval metrics, seconds)} after its last epoch


class One:
  """A single learner's calls: the epochs' program as it is, on the learner's own state."""

  def __init__(self, learner):
    self.learners = [learner]
    self._program = None

  @property
  def program(self):
    if self._program is None:
      learner = self.learners[0]
      self._program = compiler.jit(epochs_program(learner.jax_epoch, learner.jax_epoch_steps))
    return self._program

  def start(self, after):
    """The (state, carry) a call starts from when none is queued: the learner's."""
    del after
    learner = self.learners[0]
    return learner.train_state, learner.task.carry

  def unchanged(self, inputs):
    """Whether the learner still holds the state a queued call started from (not a restore)."""
    return _same_arrays(inputs, jax.tree_util.tree_leaves(self.start(None)))

  def stack_host(self, rows):
    return rows[0]

  def play(self, state, evaluating, ahead):
    """Dispatches the evaluation of `state`, the learner's epoch `ahead` epochs from now."""
    learner = self.learners[0]
    return learner.play_evaluation(state, learner.epoch + ahead) if learner.evaluates_alone \
        else None

  def read_evaluation(self, returns, evaluating, seconds):
    del evaluating
    return {0: (metrics_lib.eval_metrics(returns), seconds)}

  def epoch_outputs(self, read, i, j, evaluation):
    """Learner i's jax_epoch outputs of the call's epoch j, its state at the call's last epoch."""
    del i, evaluation
    state = read.call.outputs[:2] if j == read.call.n - 1 else (None, None)
    return state + jax.tree_util.tree_map(lambda x: x[j], read.host)


class LookAhead:
  """Runs the JAX-native epochs of a batch's learners (`One` or rl.seeds.Seeds) in calls,
  `calls_ahead` calls dispatched beyond the one being booked."""

  def __init__(self, batch, calls_ahead=1):
    self.batch = batch
    self.calls_ahead = calls_ahead
    self.queued = collections.deque()  # calls dispatched, not read yet
    self.current = None  # the Read being booked
    self._first_call = True
    self._read_at = None  # perf_counter time the last call's read (and evaluation) ended

  def plan(self, ahead):
    """(each learner's first epoch, n) of the call that starts `ahead` epochs after each
    learner's current one; None when no learner has epochs left there (ahead > 0).

    The call ends where any learner's booking reads its state; the process's
    first call runs one epoch, and so does every call of a learner with no
    last epoch set (epochs one by one, none ahead).
    """
    learners = self.batch.learners
    left = [l for l in learners if l.last_epoch is not None and l.epoch + ahead < l.last_epoch]
    if ahead and not left:
      return None
    n = 1 if self._first_call or not left else min(
        call_length(l.epoch + 1 + ahead, l.last_epoch, l.reads_state) for l in left)
    return [l.epoch + 1 + ahead for l in learners], n

  def dispatch(self, state, carry, firsts, n):
    """Starts every learner's epochs firsts[i] .. firsts[i] + n - 1 from (state, carry), and
    the evaluation after the last of them where one is due; returns the Call."""
    self._first_call = False
    batch = self.batch
    inputs = jax.tree_util.tree_leaves((state, carry))
    outputs = batch.program(state, carry, *batch.stack_host(
        [call_inputs(l.epoch_args, first, n) for l, first in zip(batch.learners, firsts)]),
                            np.int32(n))
    evaluating = [i for i, (l, first) in enumerate(zip(batch.learners, firsts))
                  if (l.last_epoch is None or first + n - 1 <= l.last_epoch)
                  and l.evaluates(first + n - 1)]
    ahead = firsts[0] - batch.learners[0].epoch - 1  # epochs before the call's first
    played = batch.play(outputs[0], evaluating, ahead + n) if evaluating else None
    return Call(firsts, n, inputs, outputs, played, evaluating)

  def read_next(self, start):
    """Reads the next call, dispatched now unless it is queued already (from the state the
    learners still hold), after dispatching the calls that follow it; returns its Read.
    start: perf_counter time its booking began (the first call's time counts from it)."""
    if self.queued and self.batch.unchanged(self.queued[0].inputs):
      call = self.queued.popleft()
    else:
      self.queued.clear()
      call = self.dispatch(*self.batch.start(self.current), *self.plan(0))
    # The next calls, each a function of the one before's outputs only, run on
    # the device while this one is booked on the host, each behind its
    # predecessor's evaluation.
    while len(self.queued) < self.calls_ahead:
      before = self.queued[-1] if self.queued else call
      planned = self.plan(call.n + sum(c.n for c in self.queued))
      if planned is None:
        break
      self.queued.append(self.dispatch(*before.outputs[:2], *planned))
    begun = start if self._read_at is None else min(start, self._read_at)
    host = jax.device_get(call.outputs[2])
    read = time.perf_counter()
    self._read_at = read
    evaluations = {}
    if call.played is not None:
      # The evaluation runs on the device after the call: read after it, its
      # seconds are its own, and the call's time is shared by its epochs.
      returns = jax.device_get(call.played)
      self._read_at = time.perf_counter()
      evaluations = self.batch.read_evaluation(returns, call.evaluating, self._read_at - read)
    self.current = Read(call, host, (read - begun) / call.n, evaluations)
    return self.current

  def take(self, start):
    """A single learner's next epoch: (outputs, seconds, evaluation), what Learner.run_epoch
    books. Its call is read when its first epoch is taken, once the calls after it are
    dispatched."""
    learner = self.batch.learners[0]
    epoch, read = learner.epoch + 1, self.current
    if not (read is not None and read.call.firsts[0] <= epoch < read.call.firsts[0] + read.call.n
            and self.batch.unchanged(read.call.inputs)):
      # The epoch starts a call (or the learner's state was replaced, by a restore).
      read = self.read_next(start)
    j = epoch - read.call.firsts[0]
    last = j == read.call.n - 1
    return (self.batch.epoch_outputs(read, 0, j, None), read.seconds,
            read.evaluations.get(0) if last else None)


def _same_arrays(a, b):
  """Whether two lists hold the very same array objects."""
  return len(a) == len(b) and all(x is y for x, y in zip(a, b))
