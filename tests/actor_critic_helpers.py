"""What the actor-critic tests share: tiny trainers (A2C, PPO, AWR, SamplingAWR).

Every trainer built with these is tiny (2 envs, 16 steps an epoch, batches of
4, an 8-wide MLP) because most of an epoch's cost is jit compilation, paid
once per trainer; the tests have to stay well under a minute on a loaded
2-core machine.
"""
import gin

from rl.envs.task import RLTask

# Small models, and a constant learning rate: the default schedule warms up
# from 0, so the first updates would not move any weights.
TINY_GIN = ['MLP.layer_widths = (8,)', 'Value.inject_actions_dim = 8',
            "multifactor.factors = 'constant'", 'multifactor.constant = 0.01']
# The smallest epoch the trainers accept: 2 envs x 8 steps, 1 value and 2
# policy gradient steps on batches of 4 slices.
TINY = dict(n_interactions_per_epoch=16, value_train_steps_per_epoch=1,
            policy_train_steps_per_epoch=2, policy_batch_size=4, value_batch_size=4)


def tiny(**overrides):
  """TINY with the estimator's one bootstrap step, updated by `overrides`."""
  return {**TINY, 'added_policy_slice_length': 1, **overrides}


def task_for(env, **kwargs):
  # The trainers build their models from gin factories at construction, so
  # the small sizes must be bound before any trainer is made.
  gin.parse_config(TINY_GIN)
  return RLTask(env=env, n_envs=2, seed=0, **kwargs)


def finite_numbers(record):
  """The record's numeric entries; train_return is NaN when no episode ended."""
  return {k: v for k, v in record.items()
          if isinstance(v, (int, float)) and k != 'train_return'}
