"""Layers shared between an actor-critic trainer's policy and value nets (n_shared_layers).

A2C copies the shared body from the policy to the value net before the
value steps and back after them, each net keeping its own head; with a
Normalize layer among the shared ones, both nets train on exactly the
normaliser statistics the acting policy had after the epoch's collection,
in the first epoch as in later ones.
"""
import gin
import jax
import numpy as np

from actor_critic_helpers import task_for
from actor_critic_helpers import tiny
from rl.nets.variables import top_level_layers
from rl.algorithms import A2C


def params_of(trainer, name):
  return jax.device_get(trainer.learner.networks[name].model_weights)


def trees_equal(a, b):
  """Same structure and bit-identical leaves."""
  if jax.tree_util.tree_structure(a) != jax.tree_util.tree_structure(b):
    return False
  return all(np.array_equal(x, y) for x, y in
             zip(jax.tree_util.tree_leaves(a), jax.tree_util.tree_leaves(b)))


def prepare(trainer, record):
  """Calls record(network, nets) where each network's epoch starts: the data preparation
  of its (single) chunk, which sees every network's state (ActorCriticTrainer.update)."""
  for name, method in (('value', 'value_targets'), ('policy', 'policy_advantages')):
    original = getattr(trainer, method)

    def prepared(nets, data, key, name=name, original=original):
      record(name, nets)
      return original(nets, data, key)
    setattr(trainer, method, prepared)


def test_shared_layers_are_copied_between_the_policy_and_the_value_net():
  trainer = A2C(task_for('CartPole-v1'), n_shared_layers=1, **tiny())
  policy_t, value_t = trainer.learner.networks['policy'], trainer.learner.networks['value']
  shared = top_level_layers(policy_t.variables)[:1]
  assert shared == top_level_layers(value_t.variables)[:1] == ['body']
  # Different init seeds: before any epoch the bodies differ, so equality
  # below can only come from the copying.
  assert not trees_equal(params_of(trainer, 'policy')['body'],
                         params_of(trainer, 'value')['body'])

  # Snapshot both nets as each of them starts to train (ActorCriticTrainer.update:
  # policy -> value before value training, value -> policy after it). Each
  # network's epoch (one chunk here) starts with its preparation of the data,
  # which sees every network's state; a debug callback hands them to the host.
  snapshots = {}
  prepare(trainer, lambda name, nets: jax.debug.callback(
      lambda policy, value: snapshots.__setitem__(name, (jax.device_get(policy),
                                                         jax.device_get(value))),
      nets['policy']['params'], nets['value']['params']))
  trainer.learner.collect(n_interactions=16)
  trainer.learner.train_epoch()
  jax.effects_barrier()

  policy_before_value, value_before_value = snapshots['value']
  assert trees_equal(policy_before_value['body'], value_before_value['body'])
  policy_before_policy, value_before_policy = snapshots['policy']
  assert trees_equal(policy_before_policy['body'], value_before_policy['body'])
  # The value step really trained the shared body, so the copy back mattered.
  assert not trees_equal(value_before_value['body'], value_before_policy['body'])

  policy_after, value_after = params_of(trainer, 'policy'), params_of(trainer, 'value')
  # The value net keeps the body it handed over; the policy then trains on it,
  # so after train_epoch the two bodies only agree again at the next epoch's
  # copy (they are NOT equal here: the policy steps moved the policy's copy).
  assert trees_equal(value_after['body'], value_before_policy['body'])
  assert not trees_equal(policy_after['body'], value_after['body'])
  # Only layer 0 is shared: each net keeps its own head, and the policy head
  # was trained by the policy steps.
  assert 'value_head' not in policy_after and 'policy_head' not in value_after
  assert not trees_equal(policy_after['policy_head'], policy_before_policy['policy_head'])


def test_a_shared_normalizer_trains_both_nets_on_the_acting_statistics():
  """With Normalize among the shared layers, both nets train on this epoch's statistics.

  The acting policy folds every collected observation into its normaliser,
  so the data of an epoch was normalised with the statistics as they stand
  after its collection; the value and the policy steps must see exactly
  those, in the first epoch (when the trainers still hold the fresh,
  count-0 statistics) as in later ones.
  """
  gin.parse_config(['Policy.normalizer = @Normalize', 'Value.normalizer = @Normalize'])
  trainer = A2C(task_for('CartPole-v1'), n_shared_layers=1, **tiny())
  policy_t, value_t = trainer.learner.networks['policy'], trainer.learner.networks['value']
  assert top_level_layers(policy_t.variables)[:1] == ['normalizer']
  seen = {}
  # The model state each network starts its training from, handed to the host.
  prepare(trainer, lambda name, nets: jax.debug.callback(
      lambda model_state: seen.__setitem__(name, jax.device_get(model_state)),
      nets[name]['model_state']))
  for epoch in (1, 2):
    # trainer.learner.collect keeps the acting state (the normaliser statistics) it moved on.
    trainer.learner.collect(n_interactions=16, epoch_id=epoch)
    acting = jax.device_get(trainer.learner.acting.model_state)
    assert float(acting['normalizer']['normalizer']['count']) == 16 * epoch
    trainer.learner.train_epoch()
    jax.effects_barrier()
    assert trees_equal(seen['value'], acting), f'epoch {epoch}: value net'
    assert trees_equal(seen['policy'], acting), f'epoch {epoch}: policy net'
