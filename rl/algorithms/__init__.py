"""RL trainers (agents): the epoch loop and the algorithms built on it.

Importing this package registers every trainer with gin.
"""
from rl.algorithms.actor_critic import A2C
from rl.algorithms.actor_critic import ActorCriticTrainer
from rl.algorithms.actor_critic import AWR
from rl.algorithms.actor_critic import PPO
from rl.algorithms.actor_critic import SamplingAWR
from rl.algorithms.joint import A2CJoint
from rl.algorithms.joint import ActorCriticJointTrainer
from rl.algorithms.joint import AWRJoint
from rl.algorithms.joint import PPOJoint
from rl.learner.base import RLTrainer
from rl.algorithms.policy import PolicyTrainer
from rl.algorithms.reinforce import PolicyGradientTrainer
from rl.algorithms.dqn import DQN
from rl.algorithms.dqn import DoubleDQN
from rl.algorithms.dqn import ValueAgent

__all__ = ['RLTrainer', 'PolicyTrainer', 'PolicyGradientTrainer', 'ActorCriticTrainer',
           'A2C', 'PPO', 'AWR', 'SamplingAWR', 'ActorCriticJointTrainer', 'PPOJoint',
           'A2CJoint', 'AWRJoint', 'ValueAgent', 'DQN', 'DoubleDQN']
