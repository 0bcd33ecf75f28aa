"""The algorithms, one family per module. Importing this package registers them with gin.

reinforce.py: PolicyTrainer, PolicyGradientTrainer (REINFORCE)
actor_critic.py: ActorCriticTrainer, the update of ppo.py: PPO, a2c.py: A2C, awr.py: AWR
  and sampling_awr.py: SamplingAWR
joint.py: ActorCriticJointTrainer, PPOJoint, A2CJoint, AWRJoint
dqn.py: ValueAgent, DQN, DoubleDQN
off_policy.py: OffPolicyTrainer, the base of sac.py: SAC and td3.py: TD3
"""
from rl.algorithms.a2c import A2C
from rl.algorithms.actor_critic import ActorCriticTrainer
from rl.algorithms.awr import AWR
from rl.algorithms.dqn import DQN
from rl.algorithms.dqn import DoubleDQN
from rl.algorithms.dqn import ValueAgent
from rl.algorithms.joint import A2CJoint
from rl.algorithms.joint import ActorCriticJointTrainer
from rl.algorithms.joint import AWRJoint
from rl.algorithms.joint import PPOJoint
from rl.algorithms.ppo import PPO
from rl.algorithms.reinforce import PolicyGradientTrainer
from rl.algorithms.reinforce import PolicyTrainer
from rl.algorithms.sac import SAC
from rl.algorithms.td3 import TD3
from rl.algorithms.sampling_awr import SamplingAWR
from rl.learner.trainer import RLTrainer

__all__ = ['RLTrainer', 'PolicyTrainer', 'PolicyGradientTrainer', 'ActorCriticTrainer',
           'A2C', 'PPO', 'AWR', 'SamplingAWR', 'ActorCriticJointTrainer', 'PPOJoint',
           'A2CJoint', 'AWRJoint', 'ValueAgent', 'DQN', 'DoubleDQN', 'SAC', 'TD3']
