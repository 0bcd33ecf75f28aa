"""An epoch's gradient steps as one pure, jittable function (`fused_epoch`), and one step.

The learner's part of every algorithm's update: a `lax.scan` over the
epoch's gradient steps, in `n_chunks` chunks, where each step draws its batch
on the device from the epoch's data and a key of its own. The algorithm's
part is the step itself, `step(carry, rows, key) -> (carry, {network:
NetworkStep})`, written as plain code: it makes its batch from the drawn
rows and takes the gradient steps of whichever networks it trains, in the
order it writes them (`gradient_step`), all on the same batch.

  * `carry` is the algorithm's pytree of what the steps change, most often
    {network name: its state}, where a network's state is {'params',
    'model_state', 'opt_state', 'step'}.
  * `draw(data, key)` picks a batch's rows (e.g. rl.data.slices.draw) and
    `take(data, drawn)` gathers them, for any leading axes of `drawn`.
  * `prepare(carry, data, key) -> data` runs at the start of every chunk:
    per-row work under the networks as the chunk starts (advantages, value
    targets), done once rather than for every batch.
  * `evaluate(carry, rows, key) -> {network: metrics}`, with `n_eval_steps`
    > 0, evaluates the metrics after each chunk on that many fresh batches
    instead of taking those of the chunk's own steps.
"""
import functools
from typing import NamedTuple

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


class NetworkStep(NamedTuple):
  """One network's numbers of one gradient step."""
  loss: jax.Array  # before the update
  gradients_l2: jax.Array  # global norm of the gradient
  metrics: dict  # name -> scalar, the loss's auxiliary output


class StepRecord(NamedTuple):
  """One network's numbers of a whole fused epoch."""
  losses: jax.Array  # [n_steps]
  gradients_l2: jax.Array  # [n_steps]
  metrics: dict  # the last chunk's: the mean over its steps, or over its eval batches


class EpochResult(NamedTuple):
  """A network's summary of an epoch, what the host reads (all on the device until read)."""
  n_steps: jax.Array  # int32: the gradient steps taken
  loss: jax.Array  # mean training loss over the steps (each before its update)
  gradients_l2: jax.Array  # mean global gradient norm over the steps
  first_non_finite: jax.Array  # int32: the first step whose loss was NaN or inf (n_steps: none)
  non_finite_loss: jax.Array  # that step's loss (0 when none)
  metrics: dict  # name -> scalar: the last chunk's metrics
  learning_rate: jax.Array  # of the last step taken
  step: jax.Array  # optimizer steps after the epoch
  weights_l2: jax.Array  # global norm of the final weights (checked to be finite)


def variables_of(net):
  """What `model.apply` takes, from a network's state."""
  return {'params': net['params'], **net['model_state']}


def gradient_step(tx, net, loss_fn, *args):
  """One optimizer step of the network whose state is `net`: (net, NetworkStep); pure.

  loss_fn(variables, *args) -> (loss, metrics) is differentiated with respect
  to the network's parameters; `tx` is its optax transformation.
  """
  def loss(params):
    return loss_fn({'params': params, **net['model_state']}, *args)
  (value, metrics), grads = jax.value_and_grad(loss, has_aux=True)(net['params'])
  updates, opt_state = tx.update(grads, net['opt_state'], net['params'])
  params = optax.apply_updates(net['params'], updates)
  net = dict(net, params=params, opt_state=opt_state, step=net['step'] + 1)
  return net, NetworkStep(value, optax.tree.norm(grads), metrics)


def one_network_step(tx, name, loss_fn, make_batch, *args):
  """(step, evaluate) of a fused epoch that trains network `name` alone; pure.

  Each step makes its batch, make_batch(nets, rows, key), and takes one
  gradient step of loss_fn(variables, batch, *args); evaluate gives the
  same loss's metrics under the network as it stands. The carry is
  {network name: its state}.
  """
  def step(nets, rows, key):
    net, stepped = gradient_step(tx, nets[name], loss_fn, make_batch(nets, rows, key), *args)
    return {**nets, name: net}, {name: stepped}

  def evaluate(nets, rows, key):
    return {name: loss_fn(variables_of(nets[name]), make_batch(nets, rows, key), *args)[1]}
  return step, evaluate


def weights_norm(params):
  """The global L2 norm of `params`, as one reduction over all of them joined.

  Only ever checked for being finite, so one reduction over the joined leaves
  serves instead of one per leaf.
  """
  leaves = [jnp.ravel(leaf).astype(jnp.float32) for leaf in jax.tree_util.tree_leaves(params)]
  if not leaves:
    return jnp.zeros((), jnp.float32)
  return jnp.sqrt(jnp.sum(jnp.square(jnp.concatenate(leaves))))


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


def epoch_result(record, net, lr_schedule):
  """The EpochResult of a network's StepRecord, given its state after the epoch."""
  learning_rate = jnp.asarray(lr_schedule(jnp.maximum(net['step'] - 1, 0)), jnp.float32)
  return summarize(record.losses, record.gradients_l2, record.metrics, learning_rate,
                   net['step'], weights_norm(net['params']))


def fused_epoch(step, carry, data, key, *, draw, take, n_chunks, steps_per_chunk,
                prepare=None, evaluate=None, n_eval_steps=0, batch_sharding=None):
  """n_chunks x steps_per_chunk steps of `step` from `carry`, with the metrics; pure.

  Args:
    step, carry, draw, take, prepare, evaluate: see the module doc.
    data: the epoch's data, handed to `prepare` and then `draw` and `take`.
    key: the PRNG key of the batches (and of `prepare`).
    n_chunks, steps_per_chunk, n_eval_steps: the epoch's shape (static).
    batch_sharding: a NamedSharding of a batch's rows across devices, or None.

  Returns:
    (carry, key, {network: StepRecord}).
  """
  def constrain(rows):
    if batch_sharding is None:
      return rows
    return jax.lax.with_sharding_constraint(rows, batch_sharding)

  def steps_given(data, key, n):
    """(key, the n steps' (batch key, rows or draw), whether the rows are gathered already).

    Every step's slices are drawn first, in a loop of their own, and their
    rows gathered for all steps at once when that fits in
    GATHER_AHEAD_BYTES: one gather per field instead of one per field and
    step, while the batches stay what each step drawing its own would give
    (the same keys, in the same order).
    """
    def one(key, _):
      key, batch_key = jax.random.split(key)
      return key, (batch_key, draw(data, batch_key))
    key, (batch_keys, drawn) = jax.lax.scan(one, key, None, length=n)
    rows = jax.eval_shape(take, data, drawn)
    size = sum(x.size * x.dtype.itemsize for x in jax.tree_util.tree_leaves(rows))
    if size <= GATHER_AHEAD_BYTES:
      return key, (batch_keys, take(data, drawn)), True
    return key, (batch_keys, drawn), False

  def rows_of(data, given, taken):
    batch_key, rows = given
    return constrain(rows if taken else take(data, rows)), batch_key

  def train_step(data, taken, carry, given):
    return step(carry, *rows_of(data, given, taken))

  def chunk(loop, _):
    carry, key = loop
    chunk_data = data
    if prepare is not None:
      key, prepare_key = jax.random.split(key)
      chunk_data = prepare(carry, data, prepare_key)
    key, train_given, taken = steps_given(chunk_data, key, steps_per_chunk)
    carry, stepped = jax.lax.scan(functools.partial(train_step, chunk_data, taken), carry,
                                  train_given, length=steps_per_chunk)
    # The metrics of the chunk's own batches, from the gradient pass...
    metrics = {name: (jax.tree_util.tree_map(lambda m: jnp.mean(m, axis=0), s.metrics)
                      if steps_per_chunk else {}) for name, s in stepped.items()}
    if n_eval_steps:
      # ...or, when asked for, of fresh batches under the chunk's final weights.
      key, eval_given, taken = steps_given(chunk_data, key, n_eval_steps)
      evaluated = jax.lax.map(lambda given: evaluate(carry, *rows_of(chunk_data, given, taken)),
                              eval_given)
      metrics = jax.tree_util.tree_map(lambda m: jnp.mean(m, axis=0), evaluated)
    return (carry, key), {name: StepRecord(s.loss, s.gradients_l2, metrics[name])
                          for name, s in stepped.items()}

  if n_chunks == 1:
    # No loop around a single chunk: XLA optimises straight-line code better
    # than the body of a one-trip loop (the preparation runs ~4x slower there).
    (carry, key), records = chunk((carry, key), None)
    records = jax.tree_util.tree_map(lambda x: x[None], records)
  else:
    (carry, key), records = jax.lax.scan(chunk, (carry, key), None, length=n_chunks)
  records = {name: StepRecord(r.losses.reshape(-1), r.gradients_l2.reshape(-1),
                              jax.tree_util.tree_map(lambda m: m[-1], r.metrics))
             for name, r in records.items()}
  return carry, key, records
