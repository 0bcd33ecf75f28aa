"""Trainers with Transformer bodies train on exactly the view they acted on.

Each stored step carries the window of its episode the policy saw
(RLTask.context_length); a training batch recomputes, with the weights the
policy acted with, the very outputs stored at acting time, in every
trainer family, and PPO's first probability ratio is 1.
"""
import os

import gin
import jax
import numpy as np
import pytest

import batch_helpers
from rl import experiment
from rl.algorithms import A2C
from rl.algorithms import PPO
from rl.algorithms import PPOJoint
from rl.algorithms.dqn import DQN
from rl.envs.task import RLTask
from rl.metrics import read_metrics
from rl.nets import transformer  # noqa: F401  (registers @TransformerDecoder)
from rl.ops import advantages


ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

CONTEXT = 4
TINY_TRANSFORMER = [
    'TransformerDecoder.d_model = 8', 'TransformerDecoder.d_ff = 16',
    'TransformerDecoder.n_heads = 2', 'TransformerDecoder.n_layers = 2',
    'Policy.body = @TransformerDecoder', 'Value.body = @TransformerDecoder',
    'PolicyAndValue.body = @TransformerDecoder', 'Quality.body = @TransformerDecoder',
    "multifactor.factors = 'constant'", 'multifactor.constant = 0.01']
ACTOR_CRITIC = dict(n_interactions_per_epoch=64, value_train_steps_per_epoch=1,
                    policy_train_steps_per_epoch=1, policy_batch_size=16, value_batch_size=16,
                    added_policy_slice_length=1, max_slice_length=2)


def task():
  gin.parse_config(TINY_TRANSFORMER)
  return RLTask(env='CartPole-v1', n_envs=2, seed=0, context_length=CONTEXT)


def joint_trainer():
  return PPOJoint(task(), n_interactions_per_epoch=64, train_steps_per_epoch=1, batch_size=16,
                  advantage_estimator=advantages.gae, added_policy_slice_length=4,
                  max_slice_length=2, advantages_per_chunk=True)


def apply(trainer, name, observation):
  network = trainer.learner.networks[name]
  # Jitted: one compile, where the Transformer applied op by op compiles each of its ops.
  return jax.jit(network.model.apply)(network.variables, observation)


def assert_real_steps_match(recomputed, stored, mask):
  real = np.asarray(mask) > 0
  assert real.sum() >= 8
  stored = np.asarray(stored)[real]
  # A batch of another size adds its products in another order: float32 rounding, relative
  # to the largest value (a near-zero Q-value beside Q-values of ~100 differs in ~1e-4).
  np.testing.assert_allclose(np.asarray(recomputed)[real], stored, rtol=1e-5,
                             atol=1e-6 + 1e-5 * np.abs(stored).max())


def assert_policy_batch_recomputes_the_acting_policy(trainer):
  batch = batch_helpers.policy_batch(trainer)
  assert batch.observation.shape[1:] == (2, CONTEXT, 5)  # slices of 2 steps, a window each
  assert_real_steps_match(apply(trainer, 'policy', batch.observation), batch.dist_inputs,
                          batch.mask)


def assert_first_ratio_is_one(trainer):
  """The first epoch trains on steps its own weights acted on: PPO's probability ratio is 1.

  The trainer has collected before: its epoch adds its own steps to the same epoch's data,
  acted on with the same weights.
  """
  record = trainer.learner.run_epoch()
  assert record['epoch'] == 1
  assert record['probs_ratio_mean'] == pytest.approx(1.0, abs=1e-6)
  assert record['approximate_kl_divergence'] == pytest.approx(0.0, abs=1e-7)


# Each trainer below is built and collects once for all of its checks: building and compiling
# a trainer's programs is most of a test's time.

def test_ppo_recomputes_the_acting_policy_and_its_first_ratio_is_one():
  trainer = PPO(task(), **ACTOR_CRITIC)
  trainer.learner.collect(n_interactions=64)
  assert_policy_batch_recomputes_the_acting_policy(trainer)
  assert_first_ratio_is_one(trainer)


def test_a2c_recomputes_the_acting_policy_and_its_windows_restart_at_episode_starts():
  """A stored step's window never reaches into the episode before it."""
  trainer = A2C(task(), **ACTOR_CRITIC)
  trainer.learner.collect(n_interactions=64)
  assert_policy_batch_recomputes_the_acting_policy(trainer)
  data = trainer.task.epochs[1]
  rows, starts, lengths = data.rows, data.traj_start, data.traj_rows
  for start, length in zip(starts, lengths):
    windows = rows['observation'][start:start + length]
    real = windows[:, :, -1].sum(axis=1)
    if windows[0, :-1, -1].sum() == 0:  # the trajectory starts an episode
      np.testing.assert_array_equal(real[:CONTEXT], np.arange(1, CONTEXT + 1)[:length])
    assert jax.device_get(real).max() <= CONTEXT


def test_a_joint_batch_recomputes_the_acting_policy_and_the_first_ratio_is_one():
  trainer = joint_trainer()
  trainer.learner.collect(n_interactions=64)
  batch = batch_helpers.joint_batch(trainer)
  dist_inputs, _ = apply(trainer, 'joint', batch.observation)
  assert_real_steps_match(dist_inputs, batch.dist_inputs, batch.mask)
  assert_first_ratio_is_one(trainer)


def test_dqn_stores_the_q_values_its_network_recomputes():
  trainer = DQN(task(), n_interactions_per_epoch=64, value_train_steps_per_epoch=1,
                value_batch_size=8)
  trainer.learner.collect(n_interactions=64)
  rows = trainer.task.epochs[1].rows
  q_values = apply(trainer, 'value', rows['observation'][:, None])[:, 0]
  assert_real_steps_match(q_values * trainer._value_scale, rows['dist_inputs'],  # pylint: disable=protected-access
                          rows['mask'])


# Each shipped sequence config, its network untouched, with bindings that keep two epochs
# short: 8 steps of each env, one gradient step on small batches, one evaluation episode. The
# checks (two epochs logged, a finite evaluation) hold at any epoch length, and most of the
# test's time is compiling the config's programs, which takes about as long at any length.
SHORT_PPO = ['PPO.n_interactions_per_epoch = 64', 'PPO.policy_train_steps_per_epoch = 1',
             'PPO.value_train_steps_per_epoch = 1', 'PPO.policy_batch_size = 16',
             'PPO.value_batch_size = 16', 'PPO.eval_every = 2', 'PPO.n_eval_episodes = 1']
SEQUENCE_CONFIGS = {
    'ppo_cartpole_transformer': SHORT_PPO,
    'ppo_cartpole_novel_transformer': SHORT_PPO,
    'ppo_cartpole_novel': SHORT_PPO,
    'ppo_joint_lunarlander_transformer': [
        'PPOJoint.n_interactions_per_epoch = 128', 'PPOJoint.train_steps_per_epoch = 1',
        'PPOJoint.batch_size = 16', 'PPOJoint.eval_every = 2', 'PPOJoint.n_eval_episodes = 1',
        # XLA's elemental emitters, as the other configs compile: the fusion emitters the config
        # picks for its long run compile this Transformer's programs in twice the time
        # (tests/test_compiler.py covers that setting).
        'compiler.fast_compile = True'],
}


@pytest.mark.parametrize('name', sorted(SEQUENCE_CONFIGS))
def test_the_sequence_configs_train_two_epochs(tmp_path, name):
  path = os.path.join(ROOT, 'configs', f'{name}.gin')
  trainer = experiment.execute([path], ['train_rl.n_epochs = 2'] + SEQUENCE_CONFIGS[name],
                               str(tmp_path / name))
  records = read_metrics(str(tmp_path / name))
  assert [r['epoch'] for r in records] == [1, 2] and trainer.epoch == 2
  assert np.isfinite(records[-1]['eval_return'])
