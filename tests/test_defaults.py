"""Every trainer builds, trains and learns from its defaults alone (issue 14).

A config that names only the env and `train_rl.trainer_class` must run. In CI
each trainer runs 2 epochs with its gradient steps cut to a few (the cost is
then mostly compilation); the learning check runs the untouched defaults for
tens of epochs and is marked slow.
"""
import math

import numpy as np
import pytest

from rl import experiment
from rl.algorithms import PolicyGradientTrainer
from rl.envs.task import RLTask
from rl.errors import ConfigError
from rl.learner.trainer import DEFAULT_EVAL_EPISODES
from rl.learner.trainer import DEFAULT_EVAL_EVERY


# Each trainer's parameters that count gradient steps per epoch.
GRADIENT_STEPS = {
    'PolicyGradientTrainer': ('train_steps_per_epoch',),
    'PPO': ('policy_train_steps_per_epoch', 'value_train_steps_per_epoch'),
    'A2C': ('policy_train_steps_per_epoch', 'value_train_steps_per_epoch'),
    'AWR': ('policy_train_steps_per_epoch', 'value_train_steps_per_epoch'),
    'SamplingAWR': ('policy_train_steps_per_epoch', 'value_train_steps_per_epoch'),
    'PPOJoint': ('train_steps_per_epoch',),
    'A2CJoint': ('train_steps_per_epoch',),
    'AWRJoint': ('train_steps_per_epoch',),
    'DQN': ('value_train_steps_per_epoch',),
    'DoubleDQN': ('value_train_steps_per_epoch',),
}
TRAINERS = sorted(GRADIENT_STEPS)

# Epochs of the learning check: the value-based trainers explore with
# epsilon = 0.99^epoch, so their greedy policy needs more (shorter) epochs.
LEARNING_EPOCHS = {name: 25 if 'DQN' in name else 10 for name in TRAINERS}
# Greedy returns of CartPole: random play scores about 22 and an untrained
# network, which pushes one way, about 9. Each run's last 5 evaluations must
# average this much; seed 0 clears it for every trainer (see the README).
LEARNED_RETURN = 75.0
LAST_EPOCHS = 5


def run_from_defaults(tmp_path, name, bindings):
  """Runs a config of only the env and the trainer, plus `bindings` (budget, evaluation)."""
  config = tmp_path / 'defaults.gin'
  config.write_text(f"RLTask.env = 'CartPole-v1'\ntrain_rl.trainer_class = @{name}\n")
  return experiment.execute([str(config)], bindings, str(tmp_path / 'run'))


@pytest.mark.parametrize('name', TRAINERS)
def test_trainer_builds_and_trains_two_epochs_from_defaults(tmp_path, name):
  few_steps = [f'{name}.{param} = 4' for param in GRADIENT_STEPS[name]]
  trainer = run_from_defaults(tmp_path, name, ['train_rl.n_epochs = 2'] + few_steps)
  assert [r['epoch'] for r in trainer.history] == [1, 2]
  # The default epoch collects until 10 whole episodes are done; envs that
  # finish in the same step as the 10th are kept too (at most n_envs - 1 more).
  counts = [r['n_trajectories'] for r in trainer.history]
  per_epoch = [counts[0], counts[1] - counts[0]]
  assert all(10 <= n < 10 + trainer.task.n_envs for n in per_epoch), counts
  for record in trainer.history:
    numbers = {k: v for k, v in record.items() if isinstance(v, (int, float))}
    assert any(k.endswith('_loss') for k in numbers), sorted(record)
    bad = {k: v for k, v in numbers.items() if not math.isfinite(v)}
    assert not bad, f'{name}: non-finite metrics {bad}'
  # The default evaluation: every 10 epochs and the last, so this run ends with one.
  assert 'eval_return' not in trainer.history[0]
  assert math.isfinite(trainer.history[1]['eval_return'])


@pytest.mark.parametrize('bound, episodes, every', [
    ({}, DEFAULT_EVAL_EPISODES, DEFAULT_EVAL_EVERY),
    ({'n_eval_episodes': 2}, 2, 1),
    ({'eval_every': 3}, DEFAULT_EVAL_EPISODES, 3),
    ({'n_eval_episodes': 0}, 0, 1)])
def test_a_trainer_without_evaluation_bindings_evaluates_every_few_epochs(bound, episodes,
                                                                           every):
  trainer = PolicyGradientTrainer(RLTask(env='CartPole-v1', n_envs=2), **bound)
  assert (trainer.options.n_eval_episodes, trainer.options.eval_every) == (episodes, every)
  learner = trainer.learner
  learner.last_epoch = 25
  evaluating = [e for e in range(1, 26) if learner.evaluates(e)]
  assert evaluating == ([] if not episodes else sorted({*range(every, 26, every), 25}))
  trainer.close()


@pytest.mark.parametrize('name', ['PolicyTrainer', 'ActorCriticTrainer',
                                  'ActorCriticJointTrainer', 'ValueAgent'])
def test_base_classes_are_not_trainers_of_their_own(tmp_path, name):
  """The bases leave their loss (or targets) to subclasses, so gin does not offer them."""
  with pytest.raises(ConfigError, match=name):
    run_from_defaults(tmp_path, name, [])


@pytest.mark.slow
@pytest.mark.parametrize('name', TRAINERS)
def test_trainer_learns_from_defaults(tmp_path, name):
  trainer = run_from_defaults(tmp_path, name, [f'train_rl.n_epochs = {LEARNING_EPOCHS[name]}',
                                               f'{name}.n_eval_episodes = 5'])
  evals = [r['eval_return'] for r in trainer.history]
  print(name, 'eval returns', [round(e) for e in evals])
  assert np.mean(evals[-LAST_EPOCHS:]) >= LEARNED_RETURN, evals
