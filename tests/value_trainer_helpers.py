"""What the value-trainer tests (ValueAgent, DQN, DoubleDQN) share.

Tiny trainers (2 envs, 8-wide nets, a few steps) because most of their cost
is jit compilation, the shipped DQN config, and a bit-exact comparison of
parameter trees.
"""
import os

import gin
import jax
import numpy as np

from rl.envs.task import RLTask

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DQN_CONFIG = os.path.join(ROOT, 'configs', 'dqn_cartpole.gin')

TINY_GIN = ['MLP.layer_widths = (8,)', "multifactor.factors = 'constant'",
            'multifactor.constant = 0.01']
TINY = dict(n_interactions_per_epoch=16, value_train_steps_per_epoch=2, value_batch_size=8)


def task_for(env, **kwargs):
  gin.parse_config(TINY_GIN)
  return RLTask(env=env, n_envs=2, seed=0, **kwargs)


def trees_equal(a, b):
  if jax.tree_util.tree_structure(a) != jax.tree_util.tree_structure(b):
    return False
  return all(np.array_equal(x, y) for x, y in
             zip(jax.tree_util.tree_leaves(a), jax.tree_util.tree_leaves(b)))
