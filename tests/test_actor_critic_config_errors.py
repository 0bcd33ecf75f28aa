"""Actor-critic settings rejected when the trainer is built, with a ConfigError.

Replay for the on-policy trainers, enumerating every action of a continuous
action space, an unknown Q-value aggregate (or it and its old alias
together), bootstrapping estimators without a margin, value steps that do not
split evenly into evaluations, too many shared layers and zero Q-value
samples: each is reported at construction, before a run writes anything.
"""
import pytest

from actor_critic_helpers import task_for
from actor_critic_helpers import tiny
from rl.ops import advantages
from rl.errors import ConfigError
from rl.algorithms import A2C
from rl.algorithms import AWR
from rl.algorithms import PPO


@pytest.mark.parametrize('cls', [PPO, A2C], ids=['PPO', 'A2C'])
def test_on_policy_trainers_reject_replay(cls):
  with pytest.raises(ConfigError, match='is on-policy: n_replay_epochs must be 1'):
    cls(task_for('CartPole-v1'), n_replay_epochs=2, **tiny())


def test_all_actions_needs_a_discrete_action_space():
  with pytest.raises(ConfigError, match='needs a Discrete action space'):
    AWR(task_for('Pendulum-v1'), q_value=True, q_value_n_samples='all', **tiny())


def test_unknown_q_value_aggregate():
  with pytest.raises(ConfigError, match="q_value_aggregate must be one of .*'median'"):
    AWR(task_for('CartPole-v1'), q_value=True, q_value_aggregate='median', **tiny())


@pytest.mark.parametrize('estimator', [advantages.td_lambda, advantages.gae, advantages.td_k],
                         ids=['td_lambda', 'gae', 'td_k'])
def test_bootstrapping_estimators_need_a_margin(estimator):
  with pytest.raises(ConfigError, match='added_policy_slice_length must be >= 1'):
    PPO(task_for('CartPole-v1'), advantage_estimator=estimator,
        **tiny(added_policy_slice_length=0))


def test_value_steps_must_split_evenly_into_evals():
  with pytest.raises(ConfigError, match=r'value_train_steps_per_epoch \(3\) must be a '
                     r'positive multiple of value_evals_per_epoch \(2\)'):
    A2C(task_for('CartPole-v1'), **tiny(value_train_steps_per_epoch=3,
                                        value_evals_per_epoch=2))


# Settings that could only fail inside an epoch are checked when the learner is
# built, which the runner does before anything is written (rl/experiment.py).

def test_too_many_shared_layers_are_rejected_when_the_learner_is_built():
  trainer = A2C(task_for('CartPole-v1'), n_shared_layers=2, **tiny())
  with pytest.raises(ConfigError, match='n_shared_layers must be between 0 and 1'):
    trainer.build()


def test_zero_q_value_samples_are_rejected_at_construction():
  with pytest.raises(ConfigError, match='q_value_n_samples must be a positive integer'):
    AWR(task_for('CartPole-v1'), q_value=True, q_value_n_samples=0, **tiny())


def test_aggregate_and_its_old_alias_together_are_rejected():
  with pytest.raises(ConfigError, match='not both'):
    AWR(task_for('CartPole-v1'), q_value=True, q_value_aggregate='mean',
        q_value_aggregate_max=True, **tiny())
