"""TD3: twin delayed deep deterministic policy gradient (Fujimoto et al., 2018).

Every gradient step, on one minibatch of transitions from the replay, in order:

  1. The twin critics Q1, Q2 regress on y = r + gamma min_i Q'_i(s', a'), where
     a' = clip(mu'(s') + clip(noise, -c, c)) is the target actor's action
     smoothed with clipped Gaussian noise (target policy smoothing), from the
     target critics (no bootstrap past a termination).
  2. Every policy_delay-th step, the deterministic actor mu moves up
     Q1(s, mu(s)) under the just-updated critics (a delayed actor), and
  3. the target actor and critics move a fraction tau toward the trained ones.

The actor's loss and gradient are computed on every step and its update kept
on the delayed ones only (`jnp.where` on the network's state), so the epoch
stays one scan without a Python branch. Acting adds Gaussian noise to mu(s),
clipped to the action box (uniform over the box for the first learning_starts
env steps); greedy evaluation plays mu(s). The replay is OffPolicyTrainer's
(rl/algorithms/off_policy.py).
"""
import jax
import jax.numpy as jnp
import numpy as np

from rl import ranges
from rl.algorithms import networks
from rl.algorithms.off_policy import DeterministicActor
from rl.algorithms.off_policy import OffPolicyTrainer
from rl.algorithms.off_policy import TwinCritic
from rl.algorithms.off_policy import bootstrapped_targets
from rl.algorithms.off_policy import polyak
from rl.algorithms.off_policy import transitions
from rl.algorithms.off_policy import twin_critic_loss
from rl.configurables import configurable
from rl.errors import ConfigError
from rl.learner.acting import Acting
from rl.learner.fused_epoch import gradient_step
from rl.learner.fused_epoch import variables_of
from rl.ops import advantages
from rl.ops.advantages import masked_mean
from rl.ops.distributions import normal_and_uniform


class NoisyActions:
  """Acting of a deterministic policy: its action mu(s) (the inputs) plus Gaussian noise of
  `std`, clipped to the box [low, high]; at temperature 0, mu(s). The one sampling argument,
  `uniform` (0 or 1, traced), replaces the actions with uniform draws over the box."""

  action_dtype = np.dtype(np.float32)

  def __init__(self, shape, low, high, std):
    self.shape = self.action_shape = tuple(int(s) for s in shape)
    self.n_inputs = int(np.prod(self.shape))
    self.low = np.broadcast_to(np.asarray(low, np.float32), self.shape)
    self.high = np.broadcast_to(np.asarray(high, np.float32), self.shape)
    self.std = std

  def noise(self, key, batch_shape):
    return normal_and_uniform(key, tuple(batch_shape) + self.shape)

  def sample(self, dist_inputs, key, temperature, uniform=0.0):
    noise = None if temperature == 0 else self.noise(key, jnp.shape(dist_inputs)[:-1])
    return self.sample_given(dist_inputs, noise, temperature, uniform)

  def sample_given(self, dist_inputs, noise, temperature, uniform=0.0):
    """`sample` with `noise` = self.noise(key, batch_shape) drawn already: the same actions."""
    mu = jnp.reshape(dist_inputs, jnp.shape(dist_inputs)[:-1] + self.shape)
    if temperature == 0:
      return mu
    normal, uniform_noise = noise
    actions = jnp.clip(mu + temperature * self.std * normal, self.low, self.high)
    return jnp.where(uniform > 0, self.low + (self.high - self.low) * uniform_noise, actions)


def smoothed_td_targets(actor, critic, targets, batch, noise, noise_clip, low, high, estimator):
  """y = r_t + gamma min_i Q'_i(s_t+1, a'), a' = clip(mu'(s_t+1) + clip(noise)): [B, 1].

  `noise` [B, 1, *action_shape] is the smoothing noise in action units, clipped
  to [-noise_clip, noise_clip]; a' is clipped to the box [low, high].
  """
  next_obs = batch.observation[:, 1:]
  next_actions = actor.apply({'params': targets['actor']}, next_obs)
  next_actions = jnp.clip(next_actions + jnp.clip(noise, -noise_clip, noise_clip), low, high)
  next_q = jnp.min(critic.apply({'params': targets['critic']}, next_obs, next_actions), axis=0)
  return bootstrapped_targets(estimator, batch, next_q)


def actor_loss(actor, critic, variables, critic_variables, batch):
  """-Q1(s_t, mu(s_t)) under the critics: the actor's gradient goes through the first critic."""
  obs = batch.observation[:, :1]
  q1 = critic.apply(critic_variables, obs, actor.apply(variables, obs))[0]
  loss = -masked_mean(q1, batch.mask[:, :1])
  return loss, {'actor_loss': loss}


def where(condition, new, old):
  """`new` where `condition` (a traced bool), else `old`, leaf by leaf of two like pytrees."""
  return jax.tree_util.tree_map(lambda n, o: jnp.where(condition, n, o), new, old)


@configurable(denylist=['task', 'output_dir'])
class TD3(OffPolicyTrainer):
  """Twin delayed DDPG for Box action spaces: twin critics, a delayed actor, smoothed targets.

  Args:
    task: the RLTask.
    exploration_std: std of the acting noise, in units of half the action range.
    target_policy_noise: std of the target policy smoothing noise, in units of
      half the action range.
    target_noise_clip: the smoothing noise is clipped to +-this, in units of half
      the action range.
    policy_delay: the actor and the targets step on every this many critic steps.
    **kwargs: OffPolicyTrainer's arguments (hidden, the actor's and critics'
      optimizers and schedules, batch_size, train_steps_per_epoch, tau,
      n_replay_epochs, learning_starts) and RLTrainer's (n_interactions_per_epoch, ...).
  """

  metric_prefixes = {'actor': 'actor_', 'critic': 'critic_'}
  target_networks = ('actor', 'critic')

  def __init__(self, task, exploration_std=0.1, target_policy_noise=0.2, target_noise_clip=0.5,
               policy_delay=2, **kwargs):
    super().__init__(task, **kwargs)
    ranges.in_range('TD3.policy_delay', policy_delay, low=1)
    ranges.in_range('TD3.exploration_std', exploration_std, low=0)
    ranges.in_range('TD3.target_policy_noise', target_policy_noise, low=0)
    ranges.in_range('TD3.target_noise_clip', target_noise_clip, low=0)
    space = task.action_space
    if not (np.all(np.isfinite(space.low)) and np.all(np.isfinite(space.high))):
      raise ConfigError(f'TD3 needs a bounded action box, but {task.env_name} has {space}.')
    self.low, self.high = space.low.astype(np.float32), space.high.astype(np.float32)
    half = (self.high - self.low) / 2
    self.dist = NoisyActions(space.shape, self.low, self.high, exploration_std * half)
    self.target_noise, self.noise_clip = target_policy_noise * half, target_noise_clip * half
    self.policy_delay = int(policy_delay)
    self.estimator = advantages.td_k(gamma=task.gamma, margin=1)
    self.actor_net = self.critic_net = None

  def build_networks(self):
    obs = networks.example_observation(self.task)
    action = np.zeros((1, 1) + self.task.action_space.shape, np.float32)
    actor = DeterministicActor(self.hidden, tuple(self.low.ravel().tolist()),
                               tuple(self.high.ravel().tolist()))
    self.actor_net = networks.build_network(self.task, actor, *self.optimizers['actor'],
                                            'actor_loss', (obs,))
    self.critic_net = networks.build_network(
        self.task, TwinCritic(self.hidden), *self.optimizers['critic'], 'critic_loss',
        (obs, action), seed_offset=1)
    return {'actor': self.actor_net, 'critic': self.critic_net}, Acting('actor', self.dist)

  def train_step(self, carry, rows, key):
    """Critics; every policy_delay-th step, the actor through them, then the targets."""
    nets, targets = carry
    batch = transitions(rows)
    actor, critic = self.actor_net.model, self.critic_net.model
    # 1. The critics, on targets from the target actor (smoothed) and the target critics.
    noise = self.target_noise * jax.random.normal(key, batch.action[:, :1].shape)
    y = smoothed_td_targets(actor, critic, targets, batch, noise, self.noise_clip, self.low,
                            self.high, self.estimator)
    new_critic, critic_step = gradient_step(
        self.critic_net.tx, nets['critic'], lambda v, b: twin_critic_loss(critic, v, b, y), batch)
    # 2. The actor, through the critics as step 1 left them, kept on the delayed steps.
    delayed = new_critic['step'] % self.policy_delay == 0
    stepped_actor, actor_step = gradient_step(
        self.actor_net.tx, nets['actor'],
        lambda v, b: actor_loss(actor, critic, v, variables_of(new_critic), b), batch)
    nets = {'actor': where(delayed, stepped_actor, nets['actor']), 'critic': new_critic}
    # 3. The targets, on the same steps as the actor.
    targets = where(delayed, polyak(targets, nets, self.traced('tau', self.tau)), targets)
    return (nets, targets), {'actor': actor_step, 'critic': critic_step}

