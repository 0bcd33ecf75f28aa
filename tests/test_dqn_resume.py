"""A DQN run resumed through the runner is bit-exact.

A run that lost its last checkpoint resumes from an epoch whose target
network lags the online one, and ends with the same metrics, trainer
weights, target network and collection state as the run made in one go.
"""
import os
import shutil

import jax

from value_trainer_helpers import DQN_CONFIG
from value_trainer_helpers import trees_equal
from rl import experiment as run_lib
from rl.data.checkpoints import Checkpointer
from rl.metrics import TIMING_KEYS
from rl.metrics import read_metrics


def without_timing(records):
  return [{k: v for k, v in r.items() if k not in TIMING_KEYS} for r in records]


RUN = ['train_rl.checkpoint_every = 2', 'RLTask.n_envs = 2', 'RLTask.initial_trajectories = 2',
       'MLP.layer_widths = (8,)', 'DQN.n_interactions_per_epoch = 16',
       'DQN.value_train_steps_per_epoch = 3', 'DQN.value_batch_size = 8', 'DQN.sync_freq = 4',
       'DQN.n_eval_episodes = 2', 'DQN.eval_every = 1', 'DQN.max_slice_length = 3',
       # Fast epsilon decay so every epoch acts with a different epsilon.
       'exploration_rate/multifactor.decay_factor = 0.5']


def checkpoint_arrays(folder):
  step, arrays, _ = Checkpointer(os.path.join(folder, 'checkpoints')).restore_latest()
  return step, arrays


def test_resume_through_the_runner_is_bit_exact(tmp_path):
  straight = str(tmp_path / 'straight')
  run_lib.execute([DQN_CONFIG], RUN + ['train_rl.n_epochs = 4'], straight)
  # The same run as if it had died before its epoch-4 checkpoint: it resumes
  # from epoch 2, whose target network (synced at step 4) lags the online one
  # (step 6): 3 steps an epoch and sync_freq 4 don't align.
  resumed = str(tmp_path / 'resumed')
  shutil.copytree(straight, resumed)
  shutil.rmtree(os.path.join(resumed, 'checkpoints', '4'))
  step, arrays = checkpoint_arrays(resumed)
  assert step == 2
  assert not trees_equal(arrays['extra']['target']['params'],
                         arrays['trainers']['value']['params'])
  trainer = run_lib.execute([DQN_CONFIG], RUN + ['train_rl.n_epochs = 4'], resumed)
  assert trainer.epoch == 4 and trainer.learner.networks['value'].step == 12
  records = without_timing(read_metrics(straight))
  assert [r['epoch'] for r in records] == [1, 2, 3, 4]
  assert len({r['exploration_rate'] for r in records}) == 4
  assert without_timing(read_metrics(resumed)) == records
  step_a, arrays_a = checkpoint_arrays(straight)
  step_b, arrays_b = checkpoint_arrays(resumed)
  assert step_a == step_b == 4
  for part in (arrays_a['trainers'], arrays_a['extra'], arrays_a['collect']):
    assert jax.tree_util.tree_leaves(part)
  assert trees_equal(arrays_a['trainers'], arrays_b['trainers'])
  assert trees_equal(arrays_a['extra'], arrays_b['extra'])
  assert trees_equal(arrays_a['collect'], arrays_b['collect'])
  # Step 12 is a multiple of sync_freq: the saved target is the final online net.
  assert trees_equal(arrays_a['extra']['target']['params'],
                     arrays_a['trainers']['value']['params'])
