"""Joint trainers: metrics on a hand-computed batch, masking, resume, smoke runs."""
import math
import os

import jax
import numpy as np
import pytest

from rl.ops import advantages
from rl.data import slices
from rl import experiment as run_lib
from rl.errors import ConfigError
from rl.metrics import TIMING_KEYS
from rl.metrics import read_metrics
from rl.data.trajectories import Batch
from rl.envs.task import RLTask
from rl.algorithms.joint import A2CJoint
from rl.algorithms.joint import AWRJoint
from rl.algorithms.joint import PPOJoint
from rl.algorithms import batches

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PPO_JOINT = os.path.join(ROOT, 'configs', 'ppo_joint_cartpole.gin')
# Epochs of whole episodes: the joint trainers' default estimator, monte_carlo,
# refuses episodes cut at an epoch's end.
SMALL = dict(n_trajectories_per_epoch=2, batch_size=4, train_steps_per_epoch=1)


def chain_task(**kwargs):
  return RLTask(env='rl_test/Chain-v0', n_envs=2, seed=0, **kwargs)


def zero_weights(trainer):
  """Zero logits (a uniform policy) and zero values: the metrics become hand-computable."""
  joint = trainer.learner.networks['joint']  # pylint: disable=protected-access
  joint.model_weights = jax.tree_util.tree_map(np.zeros_like, joint.model_weights)
  return joint


def joint_metrics(trainer, batch):
  """The joint loss's metrics of one given batch under the network's weights (floats)."""
  variables = trainer.learner.networks['joint'].variables
  _, metrics = jax.jit(trainer.joint_loss)(variables, batch, {})
  return {name: float(value) for name, value in jax.device_get(metrics).items()}


def hand_batch():
  """Two slices of 2 rows (a task Batch, as the joint loss reads it by field name);
  the second slice's second row is padding."""
  return Batch(
      observation=np.zeros((2, 2, 1), np.float32),
      action=np.array([[1, 0], [1, 0]]),
      reward=np.zeros((2, 2), np.float32),
      done=np.zeros((2, 2), np.float32),
      mask=np.array([[1.0, 1.0], [1.0, 0.0]], np.float32),
      dist_inputs=np.zeros((2, 2, 2), np.float32),  # of the policy that acted
      return_=np.array([[3.0, 1.0], [-1.0, 0.0]], np.float32))


def test_ppo_joint_metrics_by_hand():
  trainer = PPOJoint(chain_task(), max_slice_length=2, value_loss_coeff=0.5,
                     entropy_coeff=0.1, epsilon=0.2, **SMALL)
  zero_weights(trainer)
  metrics = joint_metrics(trainer, hand_batch())
  # monte_carlo with V = 0: A = R on the real steps (3, 1, -1): mean 1, norm sqrt(11).
  assert metrics['advantage_mean'] == pytest.approx(1.0)
  assert metrics['advantage_norm'] == pytest.approx(math.sqrt(11))
  # Targets = V + A = R; value loss = 0.5 * mean(R^2) = 0.5 * 11 / 3.
  assert metrics['value_loss'] == pytest.approx(0.5 * 11 / 3, rel=1e-5)
  # V = 0 explains nothing: 1 - Var(R) / Var(R).
  assert metrics['explained_variance'] == pytest.approx(0.0, abs=1e-6)
  # Uniform two-way policy: log pi = log 1/2; greedy action = index 0; entropy log 2.
  assert metrics['log_probs_mean'] == pytest.approx(math.log(0.5), rel=1e-6)
  assert metrics['preferred_move'] == pytest.approx(0.0)
  assert metrics['entropy_loss'] == pytest.approx(0.1 * math.log(2), rel=1e-6)
  # New and old policies agree: ratio 1, nothing clipped, KL 0.
  assert metrics['probs_ratio_mean'] == pytest.approx(1.0)
  assert metrics['clip_fraction'] == pytest.approx(0.0)
  assert metrics['approximate_kl_divergence'] == pytest.approx(0.0, abs=1e-7)
  # Normalised advantages have mean 0, so the surrogate is 0:
  # joint = -0 - 0.1 log 2 + 0.5 * 11 / 3.
  assert metrics['joint_loss'] == pytest.approx(-0.1 * math.log(2) + 0.5 * 11 / 3, rel=1e-5)


def test_a2c_joint_metrics_by_hand():
  trainer = A2CJoint(chain_task(), max_slice_length=2, value_loss_coeff=1.0,
                     entropy_coeff=0.0, **SMALL)
  zero_weights(trainer)
  metrics = joint_metrics(trainer, hand_batch())
  assert set(metrics) >= {'joint_loss', 'entropy_loss', 'advantage_mean', 'value_loss'}
  assert metrics['entropy_loss'] == 0.0
  # -mean(log(1/2) * A_normalised) = 0 (normalised A has mean 0) + 11 / 3.
  assert metrics['joint_loss'] == pytest.approx(11 / 3, rel=1e-5)


def test_an_all_padding_row_changes_nothing():
  trainer = PPOJoint(chain_task(), max_slice_length=2, **SMALL)
  batch = hand_batch()
  garbage = Batch(observation=7.0, action=1, reward=7.0, done=1.0, mask=0.0, dist_inputs=7.0,
                  return_=1e6)  # a valid action index; mask 0
  padded = Batch(*(np.concatenate([x, np.zeros_like(x[:1]) + g])
                   for x, g in zip(batch, garbage)))
  # The extra row holds garbage everywhere but its mask is 0.
  assert joint_metrics(trainer, padded)['joint_loss'] == pytest.approx(
      joint_metrics(trainer, batch)['joint_loss'], rel=1e-6)


@pytest.mark.parametrize('cls', [PPOJoint, A2CJoint, AWRJoint])
def test_each_joint_trainer_runs_with_slices_of_two(cls):
  trainer = cls(chain_task(env_kwargs={'length': 6}), max_slice_length=2,
                added_policy_slice_length=1, advantage_estimator=advantages.gae, **SMALL)
  for _ in range(2):
    record = trainer.learner.run_epoch()
  assert np.isfinite(record['joint_loss'])
  assert trainer.learner.networks['joint'].step == 2  # pylint: disable=protected-access


def test_separate_bodies_with_joint_false(tmp_path):
  trainer = run_lib.execute([PPO_JOINT], ['train_rl.n_epochs = 2', 'PolicyAndValue.joint = False',
                                          'RLTask.n_envs = 2', 'MLP.layer_widths = (8,)'],
                            str(tmp_path / 'sep'))
  params = trainer.learner.networks['joint'].model_weights  # pylint: disable=protected-access
  assert {'policy_body', 'value_body'} <= set(params)


def test_resume_step_equals_epoch_and_is_bit_exact(tmp_path):
  flags = ['PPOJoint.train_steps_per_epoch = 1', 'RLTask.n_envs = 2', 'MLP.layer_widths = (8,)',
           'PPOJoint.eval_every = 1', 'PPOJoint.n_eval_episodes = 1',
           'train_rl.checkpoint_every = 1']
  out = str(tmp_path / 'resumed')
  run_lib.execute([PPO_JOINT], flags + ['train_rl.n_epochs = 2'], out)
  trainer = run_lib.execute([PPO_JOINT], flags + ['train_rl.n_epochs = 3'], out)
  assert trainer.epoch == 3
  assert trainer.learner.networks['joint'].step == 3  # pylint: disable=protected-access
  straight = run_lib.execute([PPO_JOINT], flags + ['train_rl.n_epochs = 3'],
                             str(tmp_path / 'straight'))
  strip = lambda rs: [{k: v for k, v in r.items() if k not in TIMING_KEYS} for r in rs]
  assert strip(read_metrics(out)) == strip(straight.history)


def test_on_policy_joint_trainers_refuse_replay():
  with pytest.raises(ConfigError, match='on-policy'):
    PPOJoint(chain_task(), n_replay_epochs=3, **SMALL)
  with pytest.raises(ConfigError, match='added_policy_slice_length'):
    A2CJoint(chain_task(), advantage_estimator=advantages.gae, **SMALL)


# -- advantages per chunk ------------------------------------------------------------------------

def per_chunk_trainer(**kwargs):
  """PPOJoint with advantages per chunk: GAE with gamma 0.5, lambda 1, two steps ahead."""
  gae_lambda_1 = lambda gamma, margin: advantages.gae(gamma, margin, lambda_=1.0)  # noqa: E731
  return PPOJoint(RLTask(env='rl_test/Chain-v0', n_envs=2, seed=0, gamma=0.5),
                  advantages_per_chunk=True, advantage_estimator=gae_lambda_1,
                  added_policy_slice_length=2, max_slice_length=1, batch_size=4,
                  train_steps_per_epoch=1, n_interactions_per_epoch=8, **kwargs)


def hand_slices():
  """One terminated trajectory of 3 steps with rewards 1, 2, 3 (and its final observation)."""
  rows = {'observation': np.zeros((4, 1), np.float32), 'action': np.array([1, 0, 1, 0], np.int32),
          'reward': np.array([1.0, 2.0, 3.0, 0.0], np.float32),
          'done': np.array([0.0, 0.0, 1.0, 0.0], np.float32),
          'mask': np.array([1.0, 1.0, 1.0, 0.0], np.float32),
          'dist_inputs': np.zeros((4, 2), np.float32),
          'return_': np.array([2.75, 3.5, 3.0, 0.0], np.float32)}
  return slices.pad(rows, np.array([0], np.int32), np.array([4], np.int32))


def test_per_chunk_advantages_and_targets_by_hand():
  trainer = per_chunk_trainer()
  zero_weights(trainer)  # V = 0 everywhere: every TD error is the reward
  # Jitted, as in the epoch: one compile, where op by op each op of the network compiles.
  data, table = jax.jit(trainer.joint_advantages)(trainer.learner.train_state.nets,
                                                  hand_slices(), jax.random.PRNGKey(0))
  # Three steps to draw from (the final observation is no step of its own).
  assert int(table.total) == 3
  # A_t = d_t + 0.5 d_{t+1} over the two steps ahead, stopping at the termination:
  # A_0 = 1 + 0.5 * 2 = 2, A_1 = 2 + 0.5 * 3 = 3.5, A_2 = 3; the final observation gets 0.
  np.testing.assert_allclose(np.asarray(data.rows['advantage'])[:4], [2.0, 3.5, 3.0, 0.0])
  np.testing.assert_allclose(np.asarray(data.rows['value_target'])[:4], [2.0, 3.5, 3.0, 0.0])
  # A batch of those steps: the loss reads the advantages and targets it carries.
  batch = batches.JointBatch(
      observation=np.zeros((3, 1, 1), np.float32), action=np.array([[1], [0], [1]]),
      advantage=np.array([[2.0], [3.5], [3.0]], np.float32),
      value_target=np.array([[2.0], [3.5], [3.0]], np.float32),
      dist_inputs=np.zeros((3, 1, 2), np.float32), mask=np.ones((3, 1), np.float32))
  metrics = joint_metrics(trainer, batch)
  assert metrics['advantage_mean'] == pytest.approx(8.5 / 3, rel=1e-6)
  # value_loss_coeff (0.1) * mean((0 - target)^2) = 0.1 * (4 + 12.25 + 9) / 3.
  assert metrics['value_loss'] == pytest.approx(0.1 * 25.25 / 3, rel=1e-6)


def test_per_chunk_batches_hold_the_trained_steps_only():
  trainer = per_chunk_trainer()

  @jax.jit  # as in the epoch: one compile, where op by op each op compiles
  def first_batch(nets, data):
    data = trainer.joint_advantages(nets, data, jax.random.PRNGKey(0))
    return trainer.joint_batch(slices.take(data[0], trainer.draw_joint(data,
                                                                       jax.random.PRNGKey(1))))
  batch = first_batch(trainer.learner.train_state.nets, hand_slices())
  assert isinstance(batch, batches.JointBatch)
  assert batch.observation.shape == (4, 1, 1)  # max_slice_length steps, no margin rows
  record = None
  for _ in range(2):
    record = trainer.learner.run_epoch()
  assert np.isfinite(record['joint_loss'])
