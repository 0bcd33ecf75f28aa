"""Monte-Carlo returns need whole episodes: cut segments are refused at construction.

A stored return sums the rewards to the end of its stored segment, with no
bootstrap after it. When collection cuts a running episode into segments (at
an epoch's end with n_interactions_per_epoch, or every RLTask.max_steps
steps), a return computed on a segment would stop at the cut as if the
episode had ended there. The trainers that learn from such returns refuse
those settings with one line; bootstrapping estimators accept them.
"""
import os

import gin
import pytest

from rl.ops import advantages
from rl.config import first_sentence
from rl import experiment as run_lib
from rl.errors import ConfigError
from rl.envs.task import RLTask
from rl.algorithms import A2C
from rl.algorithms import DQN
from rl.algorithms import PolicyGradientTrainer
from rl.algorithms import PPOJoint

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.fixture(autouse=True)
def small_models():
  gin.parse_config(['MLP.layer_widths = (8,)'])


def task(**kwargs):
  return RLTask(env='rl_test/Chain-v0', n_envs=2, seed=0, **kwargs)


MC = advantages.monte_carlo
BUILDERS = {
    'PolicyGradientTrainer': lambda t, **kw: PolicyGradientTrainer(t, batch_size=4, **kw),
    'A2C': lambda t, **kw: A2C(t, advantage_estimator=MC, policy_batch_size=4,
                               value_batch_size=4, **kw),
    'PPOJoint': lambda t, **kw: PPOJoint(t, batch_size=4, **kw),  # monte_carlo by default
    'DQN': lambda t, **kw: DQN(t, advantage_estimator=MC, max_slice_length=1,
                               value_batch_size=4, **kw),
}


@pytest.mark.parametrize('name', BUILDERS)
def test_monte_carlo_returns_refuse_epochs_of_env_steps(name):
  with pytest.raises(ConfigError) as info:
    BUILDERS[name](task(), n_interactions_per_epoch=16)
  # gin appends the call site on further lines; the runner prints the first.
  message = first_sentence(str(info.value))
  assert name in message and 'n_interactions_per_epoch' in message
  assert 'n_trajectories_per_epoch' in message  # the fix


@pytest.mark.parametrize('name', BUILDERS)
def test_monte_carlo_returns_refuse_max_steps(name):
  with pytest.raises(ConfigError, match='RLTask.max_steps'):
    BUILDERS[name](task(max_steps=3), n_trajectories_per_epoch=2)


@pytest.mark.parametrize('name', BUILDERS)
def test_monte_carlo_returns_on_whole_episodes_are_accepted(name):
  BUILDERS[name](task(), n_trajectories_per_epoch=2)


def test_the_runner_refuses_in_one_line(tmp_path):
  out = tmp_path / 'x'
  config = os.path.join(ROOT, 'configs', 'ppo_joint_cartpole.gin')
  with pytest.raises(ConfigError) as info:
    run_lib.execute([config], ['PPOJoint.advantage_estimator = @monte_carlo',
                               'PPOJoint.added_policy_slice_length = 0'], str(out))
  assert '\n' not in str(info.value) and 'PPOJoint learns from Monte-Carlo' in str(info.value)
  assert not out.exists()


def test_bootstrapping_estimators_accept_cut_segments():
  A2C(task(max_steps=3), advantage_estimator=advantages.gae, added_policy_slice_length=1,
      policy_batch_size=4, value_batch_size=4, n_interactions_per_epoch=16)
  PPOJoint(task(), advantage_estimator=advantages.gae, added_policy_slice_length=1,
           batch_size=4, n_interactions_per_epoch=16)
