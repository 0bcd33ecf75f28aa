"""supervised.Trainer: an optax training loop whose whole epoch is one jitted call.

Every network of every RL trainer trains through `fused_epoch`: a `lax.scan`
over the epoch's gradient steps (in `n_chunks` chunks, with the metrics
evaluated after each), where each step draws its batch on the device from
the epoch's data and a key, so the host hands the data over once and reads
the results back once per epoch.

Contract:
  * `model` is a flax.linen Module; `inputs_fn(batch)` gives its inputs.
  * `loss_fn(model_output, batch) -> (loss, metrics)`: the scalar loss and a
    dict of scalar metrics, computed in the same pass: they are the
    auxiliary output of the gradient computation, averaged over the chunk's
    steps. With `n_eval_steps` > 0 they are instead evaluated after each
    chunk on that many fresh batches with the chunk's final weights (the
    reference's reporting, at the price of a second copy of the loss in the
    compiled program).
  * Batches are made on the device by `batches` (a DeviceBatches): every
    step draws which rows its batch holds with a key of its own
    (`draw(data, key)`, from the epoch's data, any pytree), the rows are
    gathered (`take`) and the batch made from them
    (`make(data, rows, key, carry, variables)`, with the caller's `carry`,
    e.g. target-network variables, and the variables being trained). The
    draws of a chunk's steps run first, in a loop of their own, so that
    their rows can be gathered all at once. In standalone use the batches
    come from the host iterator `inputs()` instead, stacked per epoch.
  * `prepare_fn(data, key, carry) -> data` runs at the start of every chunk:
    per-row work that would otherwise be repeated for every batch (e.g. the
    advantages of every stored step under a value network that the chunk
    keeps fixed).
  * `after_step(carry, variables, step) -> carry` runs after every update
    (`step` counts all updates so far; e.g. a target sync every N steps) and
    `after_chunk(carry, variables) -> carry` after every chunk.
  * The state is a plain pytree {'params', 'model_state', 'opt_state', 'step'}:
    `state_dict()` / `load_state_dict()` round-trip it exactly, and
    `model_weights` / `model_state` are settable (shared layers, normaliser
    statistics copied in from the acting model).
  * Data parallel over all local devices: each batch is sharded along its
    first axis and the parameters are replicated; jit inserts the gradient
    all-reduce. The loss is a mean over the global batch, so one and several
    devices compute the same numbers up to float reassociation.
"""
import functools
import math
import time
from typing import Any, Callable, NamedTuple, Optional

import flax
import jax
import jax.numpy as jnp
import numpy as np
import optax
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

from rl import compiler
from rl import keys
from rl.errors import ConfigError
from rl.errors import NonFiniteLossError


# A chunk's batches are gathered ahead, all steps at once, when their rows
# take at most this many bytes (CartPole's DQN epoch: 1.3 MB); above it
# (stacked Atari frames: 100 MB and more) each step gathers its own.
GATHER_AHEAD_BYTES = 64 * 2**20


class DeviceBatches(NamedTuple):
  """How every step's batch is made on the device from the epoch's data (pure functions)."""
  draw: Callable  # (data, key) -> which rows the batch holds (e.g. rl.data.slices.draw)
  take: Callable  # (data, drawn) -> those rows, for any leading axes of `drawn`
  make: Callable  # (data, taken rows, key, carry, variables) -> the batch


class EpochSpec(NamedTuple):
  """What a fused epoch is made of; frozen into the compiled function."""
  apply_fn: Callable  # (variables, *inputs) -> model output
  loss_fn: Callable  # (model output, batch) -> (loss, metrics)
  tx: Any  # the optax transformation
  lr_schedule: Callable  # step -> learning rate (reported, evaluated on the device)
  inputs_fn: Callable  # batch -> model inputs tuple
  batches: Optional[DeviceBatches]  # None: stacked batches given to every call
  prepare_fn: Optional[Callable]  # (data, key, carry) -> data, at the start of every chunk
  after_step: Optional[Callable]  # (carry, variables, step) -> carry
  after_chunk: Optional[Callable]  # (carry, variables) -> carry
  batch_sharding: Any  # NamedSharding of a batch, or None on one device


class EpochResult(NamedTuple):
  """What one fused call returns (all on the device until read).

  Summaries rather than every step's numbers: the host reads them right
  after the compiled call, when its caches are cold, and there every numpy
  call costs several times what it does in a warm loop. Made from PPO's
  per-step arrays on the host, an epoch's metrics took 0.3-0.4 ms there
  (0.05 ms warm), 2-3% of a CartPole epoch; from these, 0.05 ms.
  """
  n_steps: jax.Array  # int32: the gradient steps taken
  loss: jax.Array  # mean training loss over the steps (each before its update)
  gradients_l2: jax.Array  # mean global gradient norm over the steps
  first_non_finite: jax.Array  # int32: the first step whose loss was NaN or inf (n_steps: none)
  non_finite_loss: jax.Array  # that step's loss (0 when none)
  metrics: dict  # name -> scalar: the last chunk's metrics
  learning_rate: jax.Array  # of the last step taken
  step: jax.Array  # optimizer steps after the epoch
  weights_l2: jax.Array  # global norm of the final weights (checked to be finite)


def summarize(losses, norms, metrics, learning_rate, step, weights_l2):
  """The EpochResult of an epoch's per-step losses and gradient norms [n_steps]; pure."""
  n_steps = losses.shape[0]
  if not n_steps:
    zero = jnp.zeros((), jnp.float32)
    return EpochResult(jnp.int32(0), zero, zero, jnp.int32(0), zero, metrics, learning_rate,
                       step, weights_l2)
  finite = jnp.isfinite(losses)
  first = jnp.where(jnp.all(finite), n_steps, jnp.argmin(finite)).astype(jnp.int32)
  bad = jnp.where(first < n_steps, losses[jnp.minimum(first, n_steps - 1)], 0.0)
  return EpochResult(jnp.int32(n_steps), jnp.mean(losses), jnp.mean(norms), first, bad,
                     metrics, learning_rate, step, weights_l2)


def weights_norm(params):
  """The global L2 norm of `params`, as one reduction over all of them joined.

  Only ever checked for being finite. Summed leaf by leaf (optax.tree.norm)
  it is a reduction and a few small kernels per leaf, which on CartPole's
  PPO cost 2-4% of an epoch; joined first, it is one.
  """
  leaves = [jnp.ravel(leaf).astype(jnp.float32) for leaf in jax.tree_util.tree_leaves(params)]
  if not leaves:
    return jnp.zeros((), jnp.float32)
  return jnp.sqrt(jnp.sum(jnp.square(jnp.concatenate(leaves))))


def variables_of(state):
  return {'params': state['params'], **state['model_state']}


def fused_epoch(spec, state, data, key, carry, stacked, *, n_chunks, steps_per_chunk,
                n_eval_steps):
  """n_chunks x steps_per_chunk updates of `state`, then the metrics; pure.

  Args:
    spec: the EpochSpec (static).
    state: {'params', 'model_state', 'opt_state', 'step'}.
    data: the epoch's data for `spec.batches`.
    key: the PRNG key the batches are drawn with.
    carry: the caller's pytree threaded through batches.make / after_step /
      after_chunk.
    stacked: with batches None, the batches: a pair (train batches with
      leading axes [n_chunks, steps_per_chunk], eval batches [n_chunks,
      n_eval_steps]); otherwise None.
    n_chunks, steps_per_chunk, n_eval_steps: the epoch's shape (static).

  Returns:
    (state, key, carry, EpochResult).
  """
  def constrain(batch):
    if spec.batch_sharding is None:
      return batch
    return jax.lax.with_sharding_constraint(batch, spec.batch_sharding)

  def draw_steps(data, key, n):
    """n steps' batch keys and draws, in a loop of their own: (key, (keys, drawn))."""
    def one(key, _):
      key, batch_key = jax.random.split(key)
      return key, (batch_key, spec.batches.draw(data, batch_key))
    return jax.lax.scan(one, key, None, length=n)

  def make_batch(data, given, carry, variables, taken):
    """A step's batch: the given one, or from (batch key, its rows or its draw)."""
    if spec.batches is None:
      return given
    batch_key, rows = given
    if not taken:
      rows = spec.batches.take(data, rows)
    return constrain(spec.batches.make(data, rows, batch_key, carry, variables))

  def steps_given(data, key, n):
    """(key, the n steps' inputs, whether their rows are gathered already).

    Every step's slices are drawn first, in a loop of their own, and their
    rows gathered for all steps at once when that fits in
    GATHER_AHEAD_BYTES: one gather per field instead of one per field and
    step, while the batches stay what each step drawing its own would give
    (the same keys, in the same order).
    """
    key, (batch_keys, drawn) = draw_steps(data, key, n)
    rows = jax.eval_shape(spec.batches.take, data, drawn)
    size = sum(x.size * x.dtype.itemsize for x in jax.tree_util.tree_leaves(rows))
    if size <= GATHER_AHEAD_BYTES:
      return key, (batch_keys, spec.batches.take(data, drawn)), True
    return key, (batch_keys, drawn), False

  def loss(params, model_state, batch):
    output = spec.apply_fn({'params': params, **model_state}, *spec.inputs_fn(batch))
    return spec.loss_fn(output, batch)

  def train_step(data, taken, loop, given):
    state, carry = loop
    batch = make_batch(data, given, carry, variables_of(state), taken)
    (value, metrics), grads = jax.value_and_grad(loss, has_aux=True)(
        state['params'], state['model_state'], batch)
    updates, opt_state = spec.tx.update(grads, state['opt_state'], state['params'])
    params = optax.apply_updates(state['params'], updates)
    state = dict(state, params=params, opt_state=opt_state, step=state['step'] + 1)
    if spec.after_step is not None:
      carry = spec.after_step(carry, variables_of(state), state['step'])
    return (state, carry), (value, optax.tree.norm(grads), metrics)

  def chunk(loop, given):
    state, key, carry = loop
    train_given, eval_given = given if given is not None else (None, None)
    chunk_data = data
    if spec.prepare_fn is not None:
      key, prepare_key = jax.random.split(key)
      chunk_data = spec.prepare_fn(data, prepare_key, carry)
    taken = False
    if spec.batches is not None:
      key, train_given, taken = steps_given(chunk_data, key, steps_per_chunk)
    (state, carry), (values, norms, metrics) = jax.lax.scan(
        functools.partial(train_step, chunk_data, taken), (state, carry),
        train_given, length=steps_per_chunk)
    # The metrics of the chunk's own batches, from the gradient pass...
    metrics = (jax.tree_util.tree_map(lambda m: jnp.mean(m, axis=0), metrics)
               if steps_per_chunk else {})
    if n_eval_steps:
      # ...or, when asked for, of fresh batches under the chunk's final weights.
      taken = False
      if spec.batches is not None:
        key, eval_given, taken = steps_given(chunk_data, key, n_eval_steps)
      variables = variables_of(state)
      metrics = jax.lax.map(
          lambda given: loss(state['params'], state['model_state'],
                             make_batch(chunk_data, given, carry, variables, taken))[1],
          eval_given)
      metrics = jax.tree_util.tree_map(lambda m: jnp.mean(m, axis=0), metrics)
    if spec.after_chunk is not None:
      carry = spec.after_chunk(carry, variables_of(state))
    # Every step's loss is checked, but it is the loss before that step's
    # update; the norm of the weights the last update made is checked too,
    # so weights gone NaN or infinite stop the run now, not an epoch (and
    # maybe a checkpoint of them) later. It is cheaper than the last batch's
    # loss under the new weights, and finite weights whose loss is NaN are
    # caught by the next epoch's first step.
    after = weights_norm(state['params'])
    return (state, key, carry), (values, norms, metrics, after)

  if n_chunks == 1:
    # No loop around a single chunk: XLA optimises straight-line code better
    # than the body of a one-trip loop (the preparation runs ~4x slower there).
    first = None if stacked is None else jax.tree_util.tree_map(lambda x: x[0], stacked)
    (state, key, carry), outputs = chunk((state, key, carry), first)
    values, norms, metrics, after = jax.tree_util.tree_map(lambda x: x[None], outputs)
  else:
    (state, key, carry), (values, norms, metrics, after) = jax.lax.scan(
        chunk, (state, key, carry), stacked, length=n_chunks)
  last = jax.tree_util.tree_map(lambda m: m[-1], metrics)
  learning_rate = jnp.asarray(spec.lr_schedule(jnp.maximum(state['step'] - 1, 0)), jnp.float32)
  return state, key, carry, summarize(values.reshape(-1), norms.reshape(-1), last,
                                      learning_rate, state['step'], after[-1])


def evaluate_batch(spec, state, batch):
  """(loss, metrics) of `batch` under the current weights; pure."""
  output = spec.apply_fn(variables_of(state), *spec.inputs_fn(batch))
  return spec.loss_fn(output, batch)


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
