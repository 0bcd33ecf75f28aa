"""Draws one training batch of an RL trainer's network, as its fused epoch would.

The trainers draw their batches on the device inside the compiled epoch
(rl.learner.fused_epoch): per chunk, the algorithm's preparation of the data
(per-row advantages or value targets, and the draw table), then for each step
its draw, the gather of the drawn rows and the algorithm's batch of them.
These helpers call the same methods once, jitted, with a fixed key (so a
test's batch is repeatable), and bring the batch back to the host.
"""
import jax

from rl.data import slices


def _batch(prepare, draw, make, data, seed):
  """make(rows, key) of the rows `draw` picks from prepare(data, key)'s data; on the host."""
  def batch(data, key):
    key, prepare_key = jax.random.split(key)
    data = prepare(data, prepare_key)
    return make(slices.take_slices(data, draw(data, key)), key)
  return jax.device_get(jax.jit(batch)(data, jax.random.PRNGKey(seed)))


def with_variables(net, variables):
  """A network state holding `variables` ({'params', **model_state})."""
  variables = dict(variables)
  return dict(net, params=variables.pop('params'), model_state=variables)


def value_batch(trainer, seed=0, target=None):
  """A ValueBatch of an ActorCriticTrainer or ValueAgent: every stored epoch, with
  `target` as the target network's variables (default: the one an epoch's training
  starts from, the online value network)."""
  nets = trainer.learner.train_state.nets
  online = trainer.learner.networks['value'].variables
  target = online if target is None else target
  if hasattr(trainer, 'value_data'):  # a ValueAgent
    return _batch(lambda data, key: trainer.value_data(data), trainer.draw_value_slices,
                  lambda rows, key: trainer.value_batch(target, online, rows),
                  trainer.task.slice_data(), seed)
  nets = dict(nets, value=with_variables(nets['value'], target))
  return _batch(lambda data, key: trainer.value_targets(nets, data, key), trainer.draw_value,
                lambda rows, key: trainer.value_batch(rows), trainer.task.slice_data(), seed)


def policy_batch(trainer, seed=0):
  """A policy batch of an ActorCriticTrainer from the data its policy trains on."""
  nets = trainer.learner.train_state.nets
  return _batch(lambda data, key: trainer.policy_advantages(nets, data, key),
                trainer.draw_policy, lambda rows, key: trainer.policy_batch(nets, rows, key),
                trainer.epoch_data(trainer.epoch)['policy'], seed)


def joint_batch(trainer, seed=0):
  """A batch of an ActorCriticJointTrainer from the data its network trains on."""
  nets = trainer.learner.train_state.nets

  def prepare(data, key):
    if trainer.per_chunk:
      return trainer.joint_advantages(nets, data, key)
    window = trainer.max_slice_length + trainer.margin
    return data, slices.draw_table(data, window, trainer.margin)
  return _batch(prepare, trainer.draw_joint, lambda rows, key: trainer.joint_batch(rows),
                trainer.epoch_data(trainer.epoch)['joint'], seed)
