"""Actor-critic trainers through the runner (rl.experiment.execute).

An A2C run resumed in its folder with more epochs continues its value and
policy step counters and logs exactly the metrics of the same run made in
one go; a PPO run writes the value network's summaries under
output_dir/value, beside the TensorBoard folder.
"""
import os


from rl import experiment as run_lib
from rl.metrics import TIMING_KEYS
from rl.metrics import read_metrics


ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PPO_CONFIG = os.path.join(ROOT, 'configs', 'ppo_cartpole.gin')


# A2C on top of the shipped PPO config (its PPO.* bindings are then unused):
# one value and two policy steps per epoch, the body shared. The runner also
# checkpoints after the last epoch, so checkpoint_every = 2 still leaves the
# 2-epoch run resumable while saving fewer checkpoints (they are slow).
A2C_RUN = ['train_rl.trainer_class = @A2C', 'train_rl.checkpoint_every = 2',
           'RLTask.n_envs = 2', 'MLP.layer_widths = (8,)',
           'A2C.n_interactions_per_epoch = 16', 'A2C.added_policy_slice_length = 1',
           'A2C.value_train_steps_per_epoch = 1', 'A2C.policy_train_steps_per_epoch = 2',
           'A2C.policy_batch_size = 4', 'A2C.value_batch_size = 4',
           'A2C.n_shared_layers = 1',
           # No evaluation: a 2-epoch run evaluates its last epoch, which a 3-epoch one does not.
           'A2C.n_eval_episodes = 0',
           # A constant rate: under the default warm-up the first steps barely move
           # the weights, and a resume that lost them would go unnoticed.
           "multifactor.factors = 'constant'", 'multifactor.constant = 0.01']


def steps(trainer):
  return trainer.learner.networks['value'].step, trainer.learner.networks['policy'].step


def without_timing(records):
  return [{k: v for k, v in r.items() if k not in TIMING_KEYS} for r in records]


def test_step_counters_survive_a_resume_and_the_resumed_run_matches(tmp_path):
  resumed = str(tmp_path / 'resumed')
  trainer = run_lib.execute([PPO_CONFIG], A2C_RUN + ['train_rl.n_epochs = 2'], resumed)
  assert steps(trainer) == (2, 4)
  # Same folder, more epochs: only n_epochs changed, so the run resumes.
  trainer = run_lib.execute([PPO_CONFIG], A2C_RUN + ['train_rl.n_epochs = 3'], resumed)
  assert trainer.epoch == 3
  assert steps(trainer) == (3, 6)

  straight = str(tmp_path / 'straight')
  trainer = run_lib.execute([PPO_CONFIG], A2C_RUN + ['train_rl.n_epochs = 3'], straight)
  assert steps(trainer) == (3, 6)
  expected = without_timing(read_metrics(straight))
  assert [r['epoch'] for r in expected] == [1, 2, 3]
  assert without_timing(read_metrics(resumed)) == expected


def test_value_and_policy_summaries_share_the_runs_tensorboard_folder(tmp_path):
  from rl import experiment as run_lib
  config = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                        'configs', 'ppo_cartpole.gin')
  out = tmp_path / 'ppo'
  run_lib.execute([config], ['train_rl.n_epochs = 1', 'RLTask.n_envs = 2',
                             'MLP.layer_widths = (8,)'], str(out))
  assert os.listdir(out / 'tensorboard') and not os.path.exists(out / 'value')
