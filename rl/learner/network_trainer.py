"""Trainer: one network, its optimizer and its fused epoch (rl.learner.fused_epoch).

Every network of every RL trainer is one of these: it makes the network's
initial state, holds the EpochSpec its epoch is traced from, and reads an
epoch's results back on the host. Data parallel over all local devices: each
batch is sharded along its first axis and the parameters are replicated; jit
inserts the gradient all-reduce.
"""
import functools
import math
import time

import flax
import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

from rl import compiler
from rl import keys
from rl.errors import ConfigError
from rl.errors import NonFiniteLossError
from rl.learner.fused_epoch import EpochSpec
from rl.learner.fused_epoch import evaluate_batch
from rl.learner.fused_epoch import fused_epoch
from rl.learner.fused_epoch import variables_of


def initialize_together(trainers):
  """Sets each trainer's initial state, all made by one compiled call.

  The whole state in one program: op by op, the initialisers (orthogonal's
  QR) cost seconds, and every optimizer-state leaf of a new shape would
  compile its own small program; and one program for all of an RL
  trainer's networks compiles in about three quarters of the time of one
  per network (the fixed cost of a compilation is paid once).
  """
  calls = [trainer.initial_state_call for trainer in trainers]

  def initial_states(args):
    return [fn(*a) for (fn, _), a in zip(calls, args)]
  for trainer, state in zip(trainers, compiler.jit(initial_states)([a for _, a in calls])):
    trainer.state = state


class Trainer:
  """Trains `model` with `optimizer(learning_rate=lr_schedule)`, an epoch per call.

  Args:
    model: a flax.linen Module.
    optimizer: a factory `optimizer(learning_rate=schedule) -> optax transform`
      (e.g. rl.optim.optimizers.Adam, bound through gin).
    lr_schedule: a schedule `step -> learning rate`, evaluated at the 0-based
      optimizer step.
    loss_fn: `loss_fn(model_output, batch) -> (loss, metrics dict)`.
    example_inputs: model inputs used only for their shapes to initialise
      the model (a tuple); None takes them from the first batch of `inputs()`.
    batches: a DeviceBatches: how every step's batch is drawn and made on
      the device (the RL trainers' slices); see `train`.
    inputs: standalone use: a callable returning an iterator of host batches;
      see `train_epoch`.
    inputs_fn: batch -> the model's inputs (a tuple). Default: the batch's
      first element.
    prepare_fn: per-chunk preparation of the data (see the module doc).
    after_step, after_chunk: hooks on the caller's carry (see the module doc).
    output_dir: if set, the trainer checkpoints itself there after every
      `train_epoch` and resumes from it on construction (standalone use; the
      RL trainers checkpoint all their parts together instead).
    seed: initialises the parameters.
    loss_name: the name the training loss is reported under.
    initialize: compute the initial state now. False leaves it to
      `initialize_together`, which makes several trainers' states in one
      compiled call (an RL trainer's networks).
  """

  def __init__(self, model, optimizer, lr_schedule, loss_fn, example_inputs=None,
               batches=None, inputs=None, inputs_fn=None, prepare_fn=None, after_step=None,
               after_chunk=None, output_dir=None, seed=0, loss_name='loss', initialize=True):
    self._loss_name = loss_name
    self._stream_fn = inputs
    self._stream = None
    tx = optimizer(learning_rate=lr_schedule)
    inputs_fn = inputs_fn or (lambda batch: (batch[0],))

    devices = jax.local_devices()
    self._n_devices = len(devices)
    if self._n_devices > 1:
      mesh = jax.sharding.Mesh(np.array(devices), ('batch',))
      batch_sharding = NamedSharding(mesh, P('batch'))
      self._replicated = NamedSharding(mesh, P())
    else:
      batch_sharding = self._replicated = None

    if example_inputs is None:
      example_inputs = inputs_fn(next(self._get_stream()))
    def initial_state(seed, *inputs):
      variables = flax.core.unfreeze(model.init(jax.random.key(seed, impl=keys.IMPL), *inputs))
      params = variables.pop('params')
      return {'params': params, 'model_state': variables, 'opt_state': tx.init(params),
              'step': jnp.zeros((), jnp.int32)}
    # The state is made by a pure function of these arguments (`initialize`).
    self.initial_state_call = (initial_state, (keys.seed_word(seed), *example_inputs))
    self._state = None
    if initialize:
      initialize_together([self])
    self.spec = EpochSpec(model.apply, loss_fn, tx, lr_schedule, inputs_fn, batches, prepare_fn,
                          after_step, after_chunk, batch_sharding)
    # No buffer donation: target networks and acting models hold references to
    # the weights this returns, and donation would invalidate them.
    self._epoch = compiler.jit(functools.partial(fused_epoch, self.spec),
                               static_argnames=('n_chunks', 'steps_per_chunk', 'n_eval_steps'))
    self._apply = compiler.jit(model.apply)
    self._evaluate = compiler.jit(functools.partial(evaluate_batch, self.spec))

    self._checkpointer = None
    if output_dir is not None:
      from rl.data.checkpoints import Checkpointer  # pylint: disable=import-outside-toplevel
      self._checkpointer = Checkpointer(output_dir)
      restored = self._checkpointer.restore_latest()
      if restored is not None:
        self.load_state_dict(restored[1]['trainer'])

  # -- devices ----------------------------------------------------------------------

  def _get_stream(self):
    if self._stream is None:
      self._stream = iter(self._stream_fn())
    return self._stream

  def _replicate(self, tree):
    if self._replicated is None:
      # Arrays already on the device stay as they are: device_put checks
      # every leaf's placement at some 0.1 ms each, which an RL trainer
      # handing its whole state back after every epoch pays many times over.
      # Checking the leaves is cheaper than rebuilding the tree, and the state
      # a compiled epoch hands back is all device arrays.
      if all(isinstance(x, jax.Array) for x in jax.tree_util.tree_leaves(tree)):
        return tree
      return jax.tree_util.tree_map(
          lambda x: x if isinstance(x, jax.Array) else jax.device_put(x), tree)
    return jax.device_put(tree, self._replicated)

  def _check_batch_size(self, size):
    if self._n_devices > 1 and size % self._n_devices:
      raise ConfigError(f'batch size {size} is not divisible by the {self._n_devices} '
                        'local devices; pick a batch size that is.')

  # -- training -------------------------------------------------------------------

  def train(self, data, key, carry=None, n_steps=1, n_chunks=1, n_eval_steps=0):
    """One fused epoch on device-drawn batches.

    Args:
      data: the epoch's data, passed to the DeviceBatches (e.g. rl.data.slices.SliceData).
      key: the PRNG key of the batches.
      carry: the caller's pytree for the batches and the hooks.
      n_steps: gradient steps (a multiple of n_chunks).
      n_chunks: the steps run in this many chunks; after each, after_chunk
        runs. The last chunk's metrics are reported.
      n_eval_steps: 0: the metrics are those of the chunk's training
        batches (computed with the loss, free); N > 0: they are evaluated
        after the chunk on N fresh batches.

    Returns:
      (results, key, carry): the host dict of results (see `results`) and
      the advanced key and carry.
    """
    start = time.perf_counter()
    self._state, key, carry, result = self._epoch(
        self._state, data, key, carry, None, n_chunks=n_chunks,
        steps_per_chunk=n_steps // n_chunks, n_eval_steps=n_eval_steps)
    return self.results(jax.device_get(result), start), key, carry

  def epoch(self, state, data, key, carry=None, n_steps=1, n_chunks=1, n_eval_steps=0):
    """`train`'s epoch as a pure function of `state`: (state, key, carry, EpochResult).

    Not jitted: it is traced into a caller's compiled function (an RL
    trainer's whole epoch, several networks and the collection with it).
    """
    return fused_epoch(self.spec, state, data, key, carry, None, n_chunks=n_chunks,
                       steps_per_chunk=n_steps // n_chunks, n_eval_steps=n_eval_steps)

  def train_epoch(self, n_steps, n_eval_steps=0):
    """Standalone use: `n_steps` updates on batches of `inputs()`, then the metrics.

    The epoch's batches are read from the host iterator, stacked and moved
    to the device in one transfer, then trained on in one fused call.
    """
    stream = self._get_stream()
    train = [next(stream) for _ in range(n_steps)]
    evals = [next(stream) for _ in range(n_eval_steps)]
    self._check_batch_size(len(jax.tree_util.tree_leaves(train or evals)[0]))

    def stack(batches, inner):
      return jax.tree_util.tree_map(
          lambda *x: np.stack(x).reshape((1, inner) + np.shape(x[0])), *batches)
    stacked = (stack(train, n_steps) if train else None,
               stack(evals, n_eval_steps) if evals else None)
    start = time.perf_counter()
    self._state, _, _, result = self._epoch(
        self._state, None, keys.seed_key(0), None, stacked, n_chunks=1,
        steps_per_chunk=n_steps, n_eval_steps=n_eval_steps)
    results = self.results(jax.device_get(result), start)
    if self._checkpointer is not None:
      self._checkpointer.save(self.step, {'trainer': self.state_dict()}, {})
    return results

  def results(self, result, start):
    """The host dict of an epoch's EpochResult: mean loss, learning_rate, gradients_l2, metrics.

    `result` is read back already (numpy or Python scalars): an RL trainer
    reads all its networks' results in one transfer.

    The mean training loss is keyed `loss_name`, or 'train_' + loss_name when
    a metric of that name exists; steps_per_second counts the epoch's steps
    over the seconds since `start` (perf_counter). Raises NonFiniteLossError
    on a NaN or infinite loss or metric.
    """
    seconds = max(time.perf_counter() - start, 1e-9)
    step = int(result.step)
    n_steps = int(result.n_steps)
    results = {}
    if n_steps:
      first = int(result.first_non_finite)
      if first < n_steps:
        raise NonFiniteLossError(self._loss_name, float(result.non_finite_loss),
                                 step - n_steps + first + 1)
      weights_l2 = float(result.weights_l2)
      if not math.isfinite(weights_l2):
        raise NonFiniteLossError(f'global norm of the weights trained on {self._loss_name}',
                                 weights_l2, step)
      train_key = self._loss_name if self._loss_name not in result.metrics else (
          'train_' + self._loss_name)
      results[train_key] = float(result.loss)
      results['gradients_l2'] = float(result.gradients_l2)
      results['steps_per_second'] = n_steps / seconds
    results['learning_rate'] = float(result.learning_rate)
    for name, value in result.metrics.items():
      value = float(value)
      if not math.isfinite(value):
        raise NonFiniteLossError(name, value, step)
      results[name] = value
    return results

  def evaluate(self, batch):
    """The metrics on one given batch (numbers, on the host)."""
    _, metrics = self._evaluate(self._state, batch)
    return {k: float(v) for k, v in jax.device_get(metrics).items()}

  def apply(self, model_inputs):
    """The model's output on the given inputs with the current weights."""
    return self._apply(self.variables, *model_inputs)

  # -- state ----------------------------------------------------------------------

  @property
  def step(self):
    return int(self._state['step'])

  @property
  def state(self):
    """The whole training state, {'params', 'model_state', 'opt_state', 'step'} (a pytree)."""
    return self._state

  @state.setter
  def state(self, state):
    self._state = self._replicate(state)

  @property
  def model_weights(self):
    return self._state['params']

  @model_weights.setter
  def model_weights(self, params):
    self._state = dict(self._state, params=self._replicate(params))

  @property
  def model_state(self):
    return self._state['model_state']

  @model_state.setter
  def model_state(self, model_state):
    self._state = dict(self._state, model_state=self._replicate(dict(model_state)))

  @property
  def variables(self):
    """{'params': ..., **model_state}: what `model.apply` takes."""
    return variables_of(self._state)

  def state_dict(self):
    """A nested dict of arrays holding everything needed to continue exactly."""
    return flax.serialization.to_state_dict(jax.device_get(self._state))

  def load_state_dict(self, state):
    template = jax.device_get(self._state)
    restored = flax.serialization.from_state_dict(template, state)
    restored = jax.tree_util.tree_map(
        lambda t, r: np.asarray(r, dtype=np.asarray(t).dtype), template, restored)
    self._state = self._replicate(restored)
