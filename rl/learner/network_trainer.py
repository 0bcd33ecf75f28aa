"""Trainer: one network, its optimizer and its state.

Every network of every RL trainer is one of these: it makes the network's
initial state, takes a gradient step inside an algorithm's compiled update,
and reads an epoch's results back on the host. Data parallel over all local
devices: each batch is sharded along its first axis and the parameters are
replicated.
"""
import math

import flax
import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

from rl import compiler
from rl import keys
from rl.errors import NonFiniteLossError
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
  """A network: its model, its optimizer `optimizer(learning_rate=lr_schedule)` and its state.

  An algorithm's update trains its state inside the compiled epoch with its
  `model` and `tx` (rl.learner.fused_epoch.gradient_step); the Learner holds
  the state between epochs and reads the epoch's EpochResult back with `results`.

  Args:
    model: a flax.linen Module.
    optimizer: a factory `optimizer(learning_rate=schedule) -> optax transform`
      (e.g. rl.optim.optimizers.Adam, bound through gin).
    lr_schedule: a schedule `step -> learning rate`, evaluated at the 0-based
      optimizer step.
    example_inputs: model inputs used only for their shapes to initialise
      the model (a tuple).
    seed: initialises the parameters.
    loss_name: the name the training loss is reported under.
    initialize: compute the initial state now. False leaves it to
      `initialize_together`, which makes several trainers' states in one
      compiled call (an RL trainer's networks).
  """

  def __init__(self, model, optimizer, lr_schedule, example_inputs, seed=0, loss_name='loss',
               initialize=True):
    self.model = model
    self.lr_schedule = lr_schedule
    self.tx = tx = optimizer(learning_rate=lr_schedule)
    self._loss_name = loss_name

    devices = jax.local_devices()
    if len(devices) > 1:
      mesh = jax.sharding.Mesh(np.array(devices), ('batch',))
      # Each batch is sharded along its first axis and the parameters are
      # replicated; jit inserts the gradient all-reduce.
      self.batch_sharding = NamedSharding(mesh, P('batch'))
      self._replicated = NamedSharding(mesh, P())
    else:
      self.batch_sharding = self._replicated = None

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

  # -- devices ----------------------------------------------------------------------

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

  # -- results ------------------------------------------------------------------------

  def results(self, result, seconds):
    """The host dict of an epoch's EpochResult: mean loss, learning_rate, gradients_l2, metrics.

    `result` is read back already (numpy or Python scalars): an RL trainer
    reads all its networks' results in one transfer.

    The mean training loss is keyed `loss_name`, or 'train_' + loss_name when
    a metric of that name exists; steps_per_second is the epoch's gradient
    steps over `seconds`, the time the epoch trained (on JAX-native envs, the
    whole fused epoch's). Raises NonFiniteLossError on a NaN or infinite loss
    or metric.
    """
    seconds = max(seconds, 1e-9)
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
