"""RL trainers (agents): the epoch loop and the algorithms built on it.

Importing this package registers every trainer with gin.
"""
from rl.trainers.actor_critic import A2C
from rl.trainers.actor_critic import ActorCriticTrainer
from rl.trainers.actor_critic import AWR
from rl.trainers.actor_critic import PPO
from rl.trainers.actor_critic import SamplingAWR
from rl.trainers.actor_critic_joint import A2CJoint
from rl.trainers.actor_critic_joint import ActorCriticJointTrainer
from rl.trainers.actor_critic_joint import AWRJoint
from rl.trainers.actor_critic_joint import PPOJoint
from rl.trainers.base import RLTrainer
from rl.trainers.policy import PolicyTrainer
from rl.trainers.policy_gradient import PolicyGradientTrainer
from rl.trainers.value import DQN
from rl.trainers.value import DoubleDQN
from rl.trainers.value import ValueAgent

__all__ = ['RLTrainer', 'PolicyTrainer', 'PolicyGradientTrainer', 'ActorCriticTrainer',
           'A2C', 'PPO', 'AWR', 'SamplingAWR', 'ActorCriticJointTrainer', 'PPOJoint',
           'A2CJoint', 'AWRJoint', 'ValueAgent', 'DQN', 'DoubleDQN']
