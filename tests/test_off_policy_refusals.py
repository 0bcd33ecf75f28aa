"""SAC and TD3 refuse what they cannot train in one line, before a run folder is written."""
import os

import pytest

from off_policy_helpers import assert_refused_in_one_line
from run_helpers import ROOT

TRAINERS = {'SAC': 'sac_pendulum.gin', 'TD3': 'td3_pendulum.gin'}


@pytest.mark.parametrize('trainer', sorted(TRAINERS))
def test_a_discrete_action_space_is_refused_in_one_line(tmp_path, trainer):
  assert_refused_in_one_line(os.path.join(ROOT, 'configs', TRAINERS[trainer]),
                             "RLTask.env = 'CartPole-v1'", tmp_path,
                             f'{trainer} needs a continuous (Box) action space', 'DQN')


@pytest.mark.parametrize('trainer', sorted(TRAINERS))
def test_random_initial_trajectories_are_refused_for_learning_starts(tmp_path, trainer):
  assert_refused_in_one_line(os.path.join(ROOT, 'configs', TRAINERS[trainer]),
                             'RLTask.initial_trajectories = 2', tmp_path,
                             f'RLTask.initial_trajectories = 2 is not supported by {trainer}',
                             f'{trainer}.learning_starts = 1000')
