"""supervised.Trainer: a jitted optax training loop over a stream of batches.

The RL trainers own one (or two) of these: the batches come from the task's
slice sampler, the loss is one of the pure functions in rl.trainers.losses.

Contract:
  * `model` is a flax.linen Module; it consumes the first `n_model_inputs`
    elements of each batch tuple, and `loss_fn(model_output, *rest)` and each
    metric `fn(model_output, *rest)` get the model output and the remaining
    elements.
  * The state is a plain pytree {'params', 'model_state', 'opt_state', 'step'}:
    `state_dict()` / `load_state_dict()` round-trip it exactly, and
    `model_weights` / `model_state` are settable (target networks, shared
    layers, normaliser statistics copied in from the acting model).
  * Data parallel over all local devices: the batch is sharded along its first
    axis with jax.sharding and the parameters are replicated; jit inserts the
    gradient all-reduce. The loss is a mean over the global batch, so one and
    several devices compute the same numbers up to float reassociation.
"""
import time

import flax
import jax
import jax.numpy as jnp
import numpy as np
import optax
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

from rl.errors import ConfigError
from rl.errors import NonFiniteLossError


class Trainer:
  """Trains `model` on `inputs()` with `optimizer(learning_rate=lr_schedule)`.

  Args:
    model: a flax.linen Module.
    optimizer: a factory `optimizer(learning_rate=schedule) -> optax transform`
      (e.g. rl.supervised.optimizers.Adam, bound through gin).
    lr_schedule: a schedule `step -> learning rate`, evaluated at the 0-based
      optimizer step.
    loss_fn: `loss_fn(model_output, *batch_rest) -> scalar`.
    inputs: a callable returning an iterator of batches (tuples of arrays).
    output_dir: if set, the trainer checkpoints itself there after every
      `train_epoch` and resumes from it on construction (standalone use; the
      RL trainers checkpoint all their parts together instead).
    metrics: dict name -> `fn(model_output, *batch_rest) -> scalar`, averaged
      over `n_eval_steps` batches in `train_epoch`.
    seed: initialises the parameters.
    example_batch: a batch used only for its shapes to initialise the model;
      None peeks the first batch of `inputs()`.
    n_model_inputs: how many leading batch elements the model consumes.
    loss_name: the name the training loss is reported under.
  """

  def __init__(self, model, optimizer, lr_schedule, loss_fn, inputs, output_dir=None,
               metrics=None, seed=0, example_batch=None, n_model_inputs=1,
               loss_name='loss'):
    self._model = model
    self._loss_fn = loss_fn
    self._metrics = dict(metrics or {})
    self._lr_schedule = lr_schedule
    self._n_in = n_model_inputs
    self._loss_name = loss_name
    self._stream_fn = inputs
    self._stream = None
    self._tx = optimizer(learning_rate=lr_schedule)

    devices = jax.local_devices()
    self._n_devices = len(devices)
    if self._n_devices > 1:
      mesh = jax.sharding.Mesh(np.array(devices), ('batch',))
      self._batch_sharding = NamedSharding(mesh, P('batch'))
      self._replicated = NamedSharding(mesh, P())
    else:
      self._batch_sharding = self._replicated = None

    if example_batch is None:
      example_batch = next(self._get_stream())
    # One compiled init: op-by-op initialisers (orthogonal's QR) cost seconds.
    variables = jax.jit(model.init)(jax.random.PRNGKey(seed), *example_batch[:self._n_in])
    variables = flax.core.unfreeze(variables)
    params = variables.pop('params')
    state = {
        'params': params,
        'model_state': variables,
        'opt_state': self._tx.init(params),
        'step': jnp.zeros((), jnp.int32),
    }
    self._state = self._replicate(state)
    # No buffer donation: target networks and acting models hold references to
    # the weights this returns, and donation would invalidate them.
    self._train_step = jax.jit(self._train_step_impl)
    self._eval_step = jax.jit(self._eval_step_impl)

    self._checkpointer = None
    if output_dir is not None:
      from rl.checkpoints import Checkpointer  # pylint: disable=g-import-not-at-top
      self._checkpointer = Checkpointer(output_dir)
      restored = self._checkpointer.restore_latest()
      if restored is not None:
        self.load_state_dict(restored[1]['trainer'])

  # -- batches and devices --------------------------------------------------------

  def _get_stream(self):
    if self._stream is None:
      self._stream = iter(self._stream_fn())
    return self._stream

  def _replicate(self, tree):
    if self._replicated is None:
      return jax.device_put(tree)
    return jax.device_put(tree, self._replicated)

  def _shard(self, batch):
    if self._batch_sharding is None:
      # Arrays already on the device (e.g. computed advantages) stay there.
      return tuple(x if isinstance(x, jax.Array) else np.asarray(x) for x in batch)
    batch = tuple(np.asarray(x) for x in batch)
    size = batch[0].shape[0]
    if size % self._n_devices:
      raise ConfigError(f'batch size {size} is not divisible by the {self._n_devices} '
                       'local devices; pick a batch size that is.')
    return jax.device_put(batch, self._batch_sharding)

  # -- the jitted math ------------------------------------------------------------

  def _apply(self, params, model_state, model_inputs):
    return self._model.apply({'params': params, **model_state}, *model_inputs)

  def _train_step_impl(self, state, batch):
    def loss(params):
      out = self._apply(params, state['model_state'], batch[:self._n_in])
      return self._loss_fn(out, *batch[self._n_in:])

    value, grads = jax.value_and_grad(loss)(state['params'])
    updates, opt_state = self._tx.update(grads, state['opt_state'], state['params'])
    params = optax.apply_updates(state['params'], updates)
    new_state = dict(state, params=params, opt_state=opt_state, step=state['step'] + 1)
    return new_state, value, optax.tree.norm(grads)

  def _eval_step_impl(self, state, batch):
    out = self._apply(state['params'], state['model_state'], batch[:self._n_in])
    rest = batch[self._n_in:]
    return {name: fn(out, *rest) for name, fn in self._metrics.items()}

  # -- training -------------------------------------------------------------------

  def train_epoch(self, n_steps, n_eval_steps=1):
    """Runs `n_steps` updates, then averages the metrics over `n_eval_steps` batches.

    Returns a dict with the mean training loss (under `loss_name`, prefixed
    'train_' if a metric of that name exists), `learning_rate`,
    `gradients_l2`, `steps_per_second` and the metrics. Raises
    NonFiniteLossError on a NaN or infinite loss or metric.
    """
    stream = self._get_stream()
    start = time.perf_counter()
    losses, grad_norms = [], []
    for _ in range(n_steps):
      self._state, loss, grad_norm = self._train_step(self._state, self._shard(next(stream)))
      losses.append(loss)
      grad_norms.append(grad_norm)
    results = {}
    if n_steps:
      losses = np.asarray(jax.device_get(jnp.stack(losses)))
      bad = np.nonzero(~np.isfinite(losses))[0]
      if bad.size:
        raise NonFiniteLossError(self._loss_name, losses[bad[0]],
                                 self.step - n_steps + int(bad[0]) + 1)
      train_key = self._loss_name if self._loss_name not in self._metrics else (
          'train_' + self._loss_name)
      results[train_key] = float(losses.mean())
      results['gradients_l2'] = float(np.mean(jax.device_get(jnp.stack(grad_norms))))
      results['steps_per_second'] = n_steps / max(time.perf_counter() - start, 1e-9)
    results['learning_rate'] = float(self._lr_schedule(max(self.step - 1, 0)))
    if self._metrics and n_eval_steps:
      sums = None
      for _ in range(n_eval_steps):
        values = jax.device_get(self._eval_step(self._state, self._shard(next(stream))))
        sums = values if sums is None else {k: sums[k] + values[k] for k in sums}
      for name, total in sums.items():
        value = float(total) / n_eval_steps
        if not np.isfinite(value):
          raise NonFiniteLossError(name, value, self.step)
        results[name] = value
    if self._checkpointer is not None:
      self._checkpointer.save(self.step, {'trainer': self.state_dict()}, {})
    return results

  def evaluate(self, batch):
    """The metrics on one given batch (numbers, on the host)."""
    return {k: float(v) for k, v in
            jax.device_get(self._eval_step(self._state, self._shard(batch))).items()}

  def apply(self, model_inputs):
    """The model's output on the given inputs with the current weights."""
    return self._apply(self._state['params'], self._state['model_state'], model_inputs)

  # -- state ----------------------------------------------------------------------

  @property
  def step(self):
    return int(self._state['step'])

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
    return {'params': self._state['params'], **self._state['model_state']}

  def state_dict(self):
    """A nested dict of arrays holding everything needed to continue exactly."""
    return flax.serialization.to_state_dict(jax.device_get(self._state))

  def load_state_dict(self, state):
    template = jax.device_get(self._state)
    restored = flax.serialization.from_state_dict(template, state)
    restored = jax.tree_util.tree_map(
        lambda t, r: np.asarray(r, dtype=np.asarray(t).dtype), template, restored)
    self._state = self._replicate(restored)
