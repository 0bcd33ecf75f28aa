"""The state an epoch reads and writes, and pure helpers that update it."""
from typing import NamedTuple

import jax


class ActingState(NamedTuple):
  """What acting carries from one env step to the next."""
  key: jax.Array  # the sampling key
  model_state: dict  # the acting model's normaliser statistics ({} without one)


class TrainState(NamedTuple):
  """Everything a trainer's epoch reads and writes, as one pytree.

  An algorithm's `update(TrainState, data)` takes one and returns the next;
  the gymnasium backend calls it once per epoch after collecting on the host,
  the JAX-native one traces it into the same compiled call as the collection.
  """
  nets: dict  # network name -> its training state {'params', 'model_state', 'opt_state', 'step'}
  train_key: jax.Array  # draws the training batches
  acting: ActingState  # collection key and normaliser statistics
  extra: dict  # algorithm-specific arrays, checkpointed (see Algorithm.initial_extra)


def with_acting_statistics(state):
  """`state` where every network with a normaliser holds the statistics the acting model
  collected with.

  The epoch's data was normalised by the acting model as its statistics stood
  after collection; a network that normalises the same observations must
  train on exactly those. A network without a normaliser is left as it is.
  """
  return state._replace(nets={
      name: dict(net, model_state=state.acting.model_state) if net['model_state'] else net
      for name, net in state.nets.items()})
