"""RL trainers (agents): the epoch loop and the algorithms built on it.

Importing this package registers every trainer with gin.
"""
from rl.trainers.base import RLTrainer
from rl.trainers.policy_gradient import PolicyGradientTrainer

__all__ = ['RLTrainer', 'PolicyGradientTrainer']
