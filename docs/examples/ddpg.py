"""DDPG (Lillicrap et al., 2016): a deterministic actor trained through its critic.

The worked example of docs/extending.md of an update that steps two networks
on one minibatch: each gradient step regresses the critic Q(s, a) on TD
targets from the target networks, then moves the actor up the gradient of
the just-updated critic, Q(s, mu(s)), then moves both target networks a
fraction tau toward the trained ones. Acting adds Gaussian noise to mu(s);
the replay keeps the last n_replay_epochs epochs of transitions.
"""
import gin
import numpy as np

from rl.algorithms import networks
from rl.algorithms.off_policy import Critic
from rl.algorithms.off_policy import DeterministicActor
from rl.algorithms.off_policy import OffPolicyTrainer
from rl.algorithms.off_policy import polyak
from rl.algorithms.off_policy import transitions
from rl.learner.acting import Acting
from rl.learner.fused_epoch import gradient_step
from rl.learner.fused_epoch import variables_of
from rl.ops import advantages
from rl.ops.distributions import Gaussian
from rl.ops.advantages import masked_mean
from rl.ops.q_learning import q_targets


def td_targets(actor, critic, targets, batch, estimator):
  """y = r_t + gamma Q'(s_t+1, mu'(s_t+1)) (no bootstrap past a termination), [B, 1]."""
  actions = actor.apply({'params': targets['actor']}, batch.observation)
  values = critic.apply({'params': targets['critic']}, batch.observation, actions)
  return q_targets(estimator, batch.reward, batch.return_, values, batch.done, batch.mask)


def critic_loss(critic, variables, batch, targets):
  """Mean squared TD error of Q(s_t, a_t) on the real first rows."""
  q = critic.apply(variables, batch.observation[:, :1], batch.action[:, :1])
  loss = masked_mean((q - targets) ** 2, batch.mask[:, :1])
  return loss, {'critic_loss': loss, 'q_mean': masked_mean(q, batch.mask[:, :1])}


def actor_loss(actor, critic, variables, critic_variables, batch):
  """-Q(s_t, mu(s_t)) under the critic: the actor's gradient goes through the critic."""
  obs = batch.observation[:, :1]
  loss = -masked_mean(critic.apply(critic_variables, obs, actor.apply(variables, obs)),
                      batch.mask[:, :1])
  return loss, {'actor_loss': loss}


@gin.configurable(denylist=['task', 'output_dir'])
class DDPG(OffPolicyTrainer):
  """Deep deterministic policy gradient, for Box action spaces.

  Args:
    task: the RLTask.
    hidden: widths of the actor's and the critic's hidden layers.
    exploration_std: std of the acting noise, in units of half the action range.
    **kwargs: OffPolicyTrainer's arguments (the actor's and critic's optimizers
      and schedules, batch_size, train_steps_per_epoch, tau, n_replay_epochs:
      its replay and its gradient steps) and RLTrainer's (n_interactions_per_epoch,
      n_eval_episodes, ...).
  """

  metric_prefixes = {'actor': 'actor_', 'critic': 'critic_'}

  def __init__(self, task, hidden=(64, 64), exploration_std=0.1, **kwargs):
    super().__init__(task, hidden=hidden, **kwargs)
    space = task.action_space
    self.low, self.high = space.low, space.high
    half_range = float(np.mean(space.high - space.low)) / 2
    self.dist = Gaussian(space.shape, std=exploration_std * half_range)
    self.estimator = advantages.td_k(gamma=task.gamma, margin=1)
    self.actor_net = self.critic_net = None

  def build_networks(self):
    obs = networks.example_observation(self.task)
    action = np.zeros((1, 1) + self.task.action_space.shape, np.float32)
    actor = DeterministicActor(self.hidden, tuple(self.low.tolist()), tuple(self.high.tolist()))
    self.actor_net = networks.build_network(self.task, actor, *self.optimizers['actor'],
                                            'actor_loss', (obs,))
    self.critic_net = networks.build_network(self.task, Critic(self.hidden),
                                             *self.optimizers['critic'], 'critic_loss',
                                             (obs, action), seed_offset=1)
    return {'actor': self.actor_net, 'critic': self.critic_net}, Acting('actor', self.dist)

  def train_step(self, carry, rows, key):
    """Critic, then actor through the updated critic, then the targets: one minibatch."""
    del key
    nets, targets = carry
    batch = transitions(rows)
    actor, critic = self.actor_net.model, self.critic_net.model
    y = td_targets(actor, critic, targets, batch, self.estimator)
    new_critic, critic_step = gradient_step(
        self.critic_net.tx, nets['critic'], lambda v, b: critic_loss(critic, v, b, y), batch)
    new_actor, actor_step = gradient_step(
        self.actor_net.tx, nets['actor'],
        lambda v, b: actor_loss(actor, critic, v, variables_of(new_critic), b), batch)
    nets = {'actor': new_actor, 'critic': new_critic}
    return (nets, polyak(targets, nets, self.tau)), {'actor': actor_step, 'critic': critic_step}
