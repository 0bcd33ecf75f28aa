"""Draws one training batch of an RL trainer's network, as its fused epoch would.

The trainers draw their batches on the device inside the compiled epoch
(rl.learner.network_trainer.fused_epoch) with the pure functions of the network's
network Trainer: `prepare_fn(data, key, carry) -> data` (where a trainer
has one, e.g. per-row advantages) and its DeviceBatches: `draw(data, key)`,
`take(data, drawn)` and `make(data, rows, key, carry, variables) -> batch`. These helpers call the same functions once, jitted, with a fixed
key (so a test's batch is repeatable), and bring the batch back to the host.
"""
import jax


def draw(trainer, name, data, carry, seed=0):
  """One batch of network `name` ('value', 'policy', 'joint') from `data` and `carry`."""
  network = trainer.learner.networks[name]
  spec = network.spec
  prepare_fn = getattr(spec, 'prepare_fn', None)

  def batch(data, key, carry, variables):
    if prepare_fn is not None:
      key, prepare_key = jax.random.split(key)
      data = prepare_fn(data, prepare_key, carry)
    batches = spec.batches
    rows = batches.take(data, batches.draw(data, key))
    return batches.make(data, rows, key, carry, variables)

  return jax.device_get(jax.jit(batch)(data, jax.random.PRNGKey(seed), carry,
                                       network.variables))


def value_batch(trainer, seed=0, target=None):
  """A ValueBatch of an ActorCriticTrainer or ValueAgent: every stored epoch, with
  `target` as the target network (default: the one an epoch's training starts
  from, the online value network)."""
  data = trainer.value_data() if hasattr(trainer, 'value_data') else trainer.task.slice_data()
  if target is None:
    target = trainer.learner.networks['value'].variables
  return draw(trainer, 'value', data, target, seed)


def policy_batch(trainer, seed=0):
  """A policy batch of a PolicyTrainer from the data and carry its policy trains on."""
  data = trainer.epoch_data(trainer.epoch)['policy']
  networks = trainer.learner.networks
  carry = networks['value'].variables if 'value' in networks else None
  return draw(trainer, 'policy', data, carry, seed)
