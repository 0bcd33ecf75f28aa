"""Seeds run from 0 to 2**31 - 1 on both backends; any other is refused up front in one line."""
import subprocess
import sys

import gin
import numpy as np
import pytest

from rl import experiment
from rl.algorithms import PPO
from rl.envs.task import MAX_SEED
from rl.envs.task import RLTask
from run_helpers import REINFORCE
from run_helpers import ROOT
from run_helpers import TINY
from run_helpers import assert_one_line_error
from run_helpers import cli

PPO_JAX = f'{ROOT}/configs/ppo_cartpole_jax.gin'


@pytest.mark.parametrize('config, flags, needle', [
    (REINFORCE, ['--seed=-1'], 'got -1'),
    (REINFORCE, [f'--seed={MAX_SEED + 1}'], f'got {MAX_SEED + 1}'),
    # On gymnax nothing else refuses a negative seed before the first evaluation.
    (PPO_JAX, ['--config=RLTask.seed = -5'], 'got -5'),
    (REINFORCE, [f'--seeds=0,{MAX_SEED + 1}'], f'has seed {MAX_SEED + 1}'),
], ids=['negative', 'too_big', 'gymnax_binding', 'seeds_member'])
def test_a_seed_out_of_range_is_one_line_exit_2_and_creates_nothing(tmp_path, config, flags,
                                                                      needle):
  out = tmp_path / 'run'
  result = cli(f'--config_file={config}', f'--output_dir={out}', *flags)
  assert_one_line_error(result, needle, str(MAX_SEED))
  assert result.returncode == 2
  assert not out.exists()


def test_a_sweep_refuses_a_seed_out_of_range(tmp_path):
  grid = tmp_path / 'grid.yaml'
  grid.write_text('RLTask.gamma: [0.9]\n')
  out = tmp_path / 'sweep'
  result = subprocess.run([sys.executable, '-m', 'launch.sweep', f'--config_file={REINFORCE}',
                           f'--sweep={grid}', f'--output_dir={out}', '--seeds=0,-1'],
                          cwd=ROOT, capture_output=True, text=True, timeout=120)
  assert_one_line_error(result, '--seeds', str(MAX_SEED))
  assert result.returncode == 2
  assert not out.exists()


def test_the_largest_seed_trains_and_evaluates_on_gymnasium(tmp_path):
  trainer = experiment.execute([REINFORCE], TINY + ['train_rl.n_epochs = 1'],
                               str(tmp_path / 'run'), seed=MAX_SEED)
  assert trainer.learner.task.seed == MAX_SEED
  assert np.isfinite(trainer.learner.history[-1]['eval_return'])


def test_the_largest_seed_trains_and_evaluates_on_gymnax():
  pytest.importorskip('gymnax')
  gin.clear_config()
  try:
    gin.parse_config(['MLP.layer_widths = (8,)'])
    trainer = PPO(RLTask(env='gymnax:CartPole-v1', n_envs=4, seed=MAX_SEED),
                  n_interactions_per_epoch=32, value_train_steps_per_epoch=2,
                  policy_train_steps_per_epoch=2, value_batch_size=16, policy_batch_size=16,
                  added_policy_slice_length=4, n_eval_episodes=3)
    record = trainer.learner.run_epoch()
  finally:
    gin.clear_config()
  assert np.isfinite(record['eval_return'])
