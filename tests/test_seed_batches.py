"""A seed draws the same numbers alone and in any `--seeds` batch (rl.keys, rl.seeds).

Seed 3 of ppo_cartpole_jax trains for one epoch alone and in the middle of
`--seeds=2-4`. Its initial parameters, the keys and actions of its first epoch's
collection, and its first epoch's collection and evaluation are the same in both.
In that batch seed 3 is neither the first member nor the member at index 3, and
the batch has more than one member: its numbers depend on none of those, so
keys derived from a member's position, from the first member's key, or from the
batch's size would all fail here. The losses may differ in their last bits: a batch's matrix
products add in another order than one seed's (docs/configuration.md).
"""
import os
from types import SimpleNamespace

import jax
import numpy as np
import pytest

from rl import experiment as run_lib
from rl import seeds as seeds_lib
from rl.envs import jax_task
from rl.metrics import TIMING_KEYS
from rl.metrics import read_metrics
from run_helpers import full_optimization

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PPO_JAX = os.path.join(ROOT, 'configs', 'ppo_cartpole_jax.gin')
BINDINGS = ['train_rl.n_epochs = 1', 'PPO.eval_every = 1', 'PPO.n_eval_episodes = 4']
SEED = 3
# Computed from the collected data by training: equal up to float rounding.
LOSS_METRICS = ('loss', 'advantage', 'kl_divergence', 'entropy', 'gradients', 'explained')


@pytest.fixture(scope='module')
def recorded():
  """Every rollout's (acting key words, actions) and every batch's initial parameters by seed,
  recorded under every XLA pass for the module's runs; each run clears them first. (A program
  with a host callback is not stored in the compilation cache: each run compiles its own.)"""
  rollouts, initial = [], {}
  rollout = jax_task.JaxTask.rollout

  def record(key, actions):
    rollouts.append((np.asarray(key), np.asarray(actions)))

  def recording_rollout(self, act_fn, noise_fn, policy_params, acting, carry, sample_args,
                        n_steps):
    out = rollout(self, act_fn, noise_fn, policy_params, acting, carry, sample_args, n_steps)
    # Under vmap the callback runs once per seed, in no set order: the key tells them apart.
    jax.debug.callback(record, jax.random.key_data(acting.key), out[2].action)
    return out

  train_together = seeds_lib.train_together

  def recording_train_together(runs, values=None):
    for run in runs:
      learner = run.learner
      initial[learner.task.seed] = jax.device_get(learner.acting_params)
    return train_together(runs, values)

  with pytest.MonkeyPatch.context() as patch:
    patch.setattr(jax_task.JaxTask, 'rollout', recording_rollout)
    patch.setattr(seeds_lib, 'train_together', recording_train_together)
    # The claim is for the programs users run, compiled with every XLA pass: without most of
    # them (tests/conftest.py) a batch's value estimates already differ from one seed's in
    # their last bits.
    with full_optimization():
      yield rollouts, initial


def split_metrics(folder):
  (record,) = read_metrics(folder)
  record = {k: v for k, v in record.items() if k not in TIMING_KEYS and 'per_second' not in k}
  losses = {k: v for k, v in record.items() if any(part in k for part in LOSS_METRICS)}
  return {k: v for k, v in record.items() if k not in losses}, losses


@pytest.fixture(scope='module')
def alone(tmp_path_factory, recorded):
  """Seed 3 trained alone: its folder, parameters after the epoch, initial parameters, and its
  first epoch's acting key and actions."""
  tmp_path = tmp_path_factory.mktemp('alone')
  rollouts, _ = recorded
  rollouts.clear()
  trainer = run_lib.execute([PPO_JAX], BINDINGS, str(tmp_path / 'alone'), SEED)
  with run_lib.prepared_run([PPO_JAX], BINDINGS, str(tmp_path / 'fresh'), SEED) as fresh:
    initial = jax.device_get(fresh.learner.acting_params)
  (key, actions), = rollouts
  return SimpleNamespace(folder=tmp_path / 'alone', initial=initial, key=key, actions=actions,
                         params=jax.device_get(trainer.learner.acting_params))


def test_seed_3_is_the_same_alone_and_in_a_batch(tmp_path, recorded, alone):
  name, seeds = 'batch', [2, 3, 4]
  rollouts, initial = recorded
  rollouts.clear()
  initial.clear()
  trainers = run_lib.execute_seeds([PPO_JAX], BINDINGS, str(tmp_path / name), seeds)
  # The initial parameters: each member's own, and seed 3's those of seed 3 alone.
  jax.tree_util.tree_map(np.testing.assert_array_equal, initial[SEED], alone.initial)
  other = next(seed for seed in seeds if seed != SEED)
  assert not all(np.array_equal(a, b) for a, b in zip(jax.tree_util.tree_leaves(initial[other]),
                                                      jax.tree_util.tree_leaves(initial[SEED])))
  # The first epoch's collection: the same acting key and the same actions.
  assert len(rollouts) == len(seeds)
  mine = [actions for key, actions in rollouts if np.array_equal(key, alone.key)]
  assert len(mine) == 1
  np.testing.assert_array_equal(mine[0], alone.actions)
  # The first epoch's record: collection and evaluation exact, losses to rounding.
  exact, losses = split_metrics(tmp_path / name / f'seed_{SEED}')
  alone_exact, alone_losses = split_metrics(alone.folder)
  assert 'eval_return' in exact and losses
  assert exact == alone_exact
  assert losses.keys() == alone_losses.keys()
  for key, value in losses.items():
    assert value == pytest.approx(alone_losses[key], rel=1e-4, abs=1e-6), key
  # So do the parameters after the epoch's updates.
  after = jax.device_get(trainers[seeds.index(SEED)].learner.acting_params)
  jax.tree_util.tree_map(
      lambda got, want: np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-6),
      after, alone.params)


def test_a_seeds_state_read_from_the_batch_is_its_slice_keys_included():
  from rl import keys  # pylint: disable=import-outside-toplevel
  stacked = ({'w': jax.numpy.arange(12.).reshape(3, 4),
              'key': jax.random.split(keys.seed_key(1), 3)}, jax.numpy.array([5, 6, 7]))
  for i in range(3):
    mine = seeds_lib._seed_states(seeds_lib._read_states(stacked), i)
    np.testing.assert_array_equal(mine[0]['w'], np.asarray(stacked[0]['w'][i]))
    assert mine[1] == 5 + i and isinstance(mine[0]['w'], np.ndarray)
    assert keys.is_key(mine[0]['key'])
    np.testing.assert_array_equal(keys.to_data(mine[0]['key']), keys.to_data(stacked[0]['key'][i]))
