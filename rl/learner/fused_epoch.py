"""One network's training epoch as one pure, jittable function (`fused_epoch`).

A `lax.scan` over the epoch's gradient steps (in `n_chunks` chunks, with the
metrics evaluated after each), where each step draws its batch on the device
from the epoch's data and a key: the host hands the data over once and reads
the results back once per epoch.

Contract:
  * `loss_fn(model_output, batch) -> (loss, metrics)`: the scalar loss and a
    dict of scalar metrics, computed in the same pass (the auxiliary output of
    the gradient), averaged over the chunk's steps. With `n_eval_steps` > 0
    they are instead evaluated after each chunk on that many fresh batches.
  * Batches are made on the device by a DeviceBatches: every step draws which
    rows its batch holds with a key of its own (`draw(data, key)`), the rows
    are gathered (`take`) and the batch made from them (`make(data, rows, key,
    carry, variables)`, with the caller's `carry`, e.g. target-network
    variables, and the variables being trained).
  * `prepare_fn(data, key, carry) -> data` runs at the start of every chunk:
    per-row work that would otherwise be repeated for every batch.
  * `after_step(carry, variables, step) -> carry` runs after every update
    (e.g. a target sync every N steps), `after_chunk(carry, variables) -> carry`
    after every chunk.
  * The state is a plain pytree {'params', 'model_state', 'opt_state', 'step'}.
"""
import functools
from typing import Any, Callable, NamedTuple, Optional

import jax
import jax.numpy as jnp
import optax


# A chunk's batches are gathered ahead, all steps at once, when their rows
# take at most this many bytes (CartPole's DQN epoch: 1.3 MB); above it (MinAtar
# observations: 13 MB an epoch; stacked Atari frames: 100 MB and more) each
# step gathers its own. Under `--seeds` (jax.vmap) a large gathered-ahead
# array is also transposed and copied whole every epoch, which makes a batch of
# seeds slower than one seed (docs/performance.md).
GATHER_AHEAD_BYTES = 4 * 2**20


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
  batches: DeviceBatches  # how every step's batch is made on the device
  prepare_fn: Optional[Callable]  # (data, key, carry) -> data, at the start of every chunk
  after_step: Optional[Callable]  # (carry, variables, step) -> carry
  after_chunk: Optional[Callable]  # (carry, variables) -> carry
  batch_sharding: Any  # NamedSharding of a batch, or None on one device


class EpochResult(NamedTuple):
  """What one fused call returns (all on the device until read).

  Summaries rather than every step's numbers, so the host reads a few scalars
  per network after the compiled call.
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

  Only ever checked for being finite, so one reduction over the joined leaves
  serves instead of one per leaf.
  """
  leaves = [jnp.ravel(leaf).astype(jnp.float32) for leaf in jax.tree_util.tree_leaves(params)]
  if not leaves:
    return jnp.zeros((), jnp.float32)
  return jnp.sqrt(jnp.sum(jnp.square(jnp.concatenate(leaves))))


def variables_of(state):
  """What `model.apply` takes, from a network's training state."""
  return {'params': state['params'], **state['model_state']}


def fused_epoch(spec, state, data, key, carry, *, n_chunks, steps_per_chunk, n_eval_steps):
  """n_chunks x steps_per_chunk updates of `state`, then the metrics; pure.

  Args:
    spec: the EpochSpec (static).
    state: {'params', 'model_state', 'opt_state', 'step'}.
    data: the epoch's data for `spec.batches`.
    key: the PRNG key the batches are drawn with.
    carry: the caller's pytree threaded through batches.make / after_step /
      after_chunk.
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
    """A step's batch from (batch key, its rows or its draw)."""
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

  def chunk(loop, _):
    state, key, carry = loop
    chunk_data = data
    if spec.prepare_fn is not None:
      key, prepare_key = jax.random.split(key)
      chunk_data = spec.prepare_fn(data, prepare_key, carry)
    key, train_given, taken = steps_given(chunk_data, key, steps_per_chunk)
    (state, carry), (values, norms, metrics) = jax.lax.scan(
        functools.partial(train_step, chunk_data, taken), (state, carry),
        train_given, length=steps_per_chunk)
    # The metrics of the chunk's own batches, from the gradient pass...
    metrics = (jax.tree_util.tree_map(lambda m: jnp.mean(m, axis=0), metrics)
               if steps_per_chunk else {})
    if n_eval_steps:
      # ...or, when asked for, of fresh batches under the chunk's final weights.
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
    (state, key, carry), outputs = chunk((state, key, carry), None)
    values, norms, metrics, after = jax.tree_util.tree_map(lambda x: x[None], outputs)
  else:
    (state, key, carry), (values, norms, metrics, after) = jax.lax.scan(
        chunk, (state, key, carry), None, length=n_chunks)
  last = jax.tree_util.tree_map(lambda m: m[-1], metrics)
  learning_rate = jnp.asarray(spec.lr_schedule(jnp.maximum(state['step'] - 1, 0)), jnp.float32)
  return state, key, carry, summarize(values.reshape(-1), norms.reshape(-1), last,
                                      learning_rate, state['step'], after[-1])


def evaluate_batch(spec, state, batch):
  """(loss, metrics) of `batch` under the current weights; pure."""
  output = spec.apply_fn(variables_of(state), *spec.inputs_fn(batch))
  return spec.loss_fn(output, batch)
