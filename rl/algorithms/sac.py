"""SAC: soft actor-critic with a learned entropy temperature (Haarnoja et al., 2018).

Every gradient step, on one minibatch of transitions from the replay, in order:

  1. The twin critics Q1, Q2 regress on the soft TD target
     y = r + gamma (min_i Q'_i(s', a') - alpha log pi(a'|s')), a' ~ pi(.|s'),
     from the target critics (no bootstrap past a termination).
  2. The actor, a Gaussian squashed by tanh into the action box, moves to
     maximise min_i Q_i(s, a) - alpha log pi(a|s) under the just-updated
     critics, through the reparameterised draw of a.
  3. The temperature, alpha = exp(log alpha), moves to hold the policy's
     entropy at target_entropy (default -action_dim).
  4. The target critics move a fraction tau toward the critics (Polyak).

Acting samples from the policy (uniformly over the box for the first
learning_starts env steps); greedy evaluation plays tanh(mean) scaled to the
box. The replay is OffPolicyTrainer's (rl/algorithms/off_policy.py).
"""
import math

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np

from rl import ranges
from rl.algorithms import networks
from rl.algorithms.off_policy import OffPolicyTrainer
from rl.algorithms.off_policy import TwinCritic
from rl.algorithms.off_policy import bootstrapped_targets
from rl.algorithms.off_policy import polyak
from rl.algorithms.off_policy import transitions
from rl.algorithms.off_policy import twin_critic_loss
from rl.configurables import configurable
from rl.learner.acting import Acting
from rl.learner.fused_epoch import gradient_step
from rl.learner.fused_epoch import variables_of
from rl.nets.mlp import MLPModule
from rl.ops import advantages
from rl.ops.advantages import masked_mean
from rl.ops.distributions import TanhGaussian


class GaussianActor(nn.Module):
  """The policy's inputs [B, L, 2 * d]: an MLP, then the d means and d raw log-stds."""
  hidden: tuple
  n_inputs: int

  @nn.compact
  def __call__(self, obs):
    return nn.Dense(self.n_inputs)(MLPModule(self.hidden)(obs))


class LogAlpha(nn.Module):
  """The temperature's one parameter, log alpha (a scalar), starting at log(initial)."""
  initial: float

  @nn.compact
  def __call__(self):
    return self.param('log_alpha', lambda key: jnp.full((), math.log(self.initial), jnp.float32))


def soft_td_targets(dist, actor, critic, actor_variables, target_critic, batch, alpha, noise,
                    estimator):
  """y = r_t + gamma (min_i Q'_i(s_t+1, a') - alpha log pi(a'|s_t+1)), a' ~ pi: [B, 1].

  `noise` [B, 1, *action_shape] is the standard normal draw of a'.
  """
  next_obs = batch.observation[:, 1:]
  next_actions, next_log_probs = dist.sample_with_log_prob(
      actor.apply(actor_variables, next_obs), noise)
  next_q = jnp.min(critic.apply({'params': target_critic}, next_obs, next_actions), axis=0)
  return bootstrapped_targets(estimator, batch, next_q - alpha * next_log_probs)


def actor_loss(dist, actor, critic, variables, critic_variables, batch, alpha, noise):
  """mean(alpha log pi(a|s) - min_i Q_i(s, a)), a = the reparameterised draw of `noise`.

  Its metrics hold the entropy estimate -mean(log pi), which the temperature's
  step reads.
  """
  obs, mask = batch.observation[:, :1], batch.mask[:, :1]
  actions, log_probs = dist.sample_with_log_prob(actor.apply(variables, obs), noise)
  q = jnp.min(critic.apply(critic_variables, obs, actions), axis=0)
  loss = masked_mean(alpha * log_probs - q, mask)
  entropy = -masked_mean(log_probs, mask)
  return loss, {'actor_loss': loss, 'entropy': jax.lax.stop_gradient(entropy)}


def temperature_loss(variables, entropy, target_entropy):
  """log alpha * (entropy - target_entropy): alpha grows while the entropy is below target."""
  log_alpha = variables['params']['log_alpha']
  loss = log_alpha * (entropy - target_entropy)
  return loss, {'alpha_loss': loss, 'alpha': jnp.exp(log_alpha)}


@configurable(denylist=['task', 'output_dir'])
class SAC(OffPolicyTrainer):
  """Soft actor-critic for Box action spaces: twin critics, a learned entropy temperature.

  Args:
    task: the RLTask.
    alpha_optimizer: the temperature's optimizer factory (it steps log alpha); None: @Adam.
    alpha_lr_schedule: the temperature's learning-rate schedule factory; None: @multifactor.
    initial_alpha: the entropy temperature alpha at the start, > 0.
    target_entropy: the policy entropy (nats) that alpha's step holds the policy
      at; None: -action_dim, the SAC paper's heuristic.
    log_std_min: the lowest log-standard deviation of the policy (per dimension).
    log_std_max: the highest log-standard deviation of the policy.
    **kwargs: OffPolicyTrainer's arguments (hidden, the actor's and critics'
      optimizers and schedules, batch_size, train_steps_per_epoch, tau,
      n_replay_epochs, learning_starts) and RLTrainer's (n_interactions_per_epoch, ...).
  """

  metric_prefixes = {'actor': 'actor_', 'critic': 'critic_', 'alpha': 'alpha_'}
  target_networks = ('critic',)

  def __init__(self, task, alpha_optimizer=None, alpha_lr_schedule=None, initial_alpha=1.0,
               target_entropy=None, log_std_min=-5.0, log_std_max=2.0, **kwargs):
    super().__init__(task, **kwargs)
    ranges.in_range('SAC.initial_alpha', initial_alpha, low=0, low_open=True)
    space = task.action_space
    self.optimizers['alpha'] = (alpha_optimizer, alpha_lr_schedule)
    self.initial_alpha = float(initial_alpha)
    self.target_entropy = float(-np.prod(space.shape) if target_entropy is None
                                else target_entropy)
    self.dist = TanhGaussian(space.shape, space.low, space.high, log_std_min, log_std_max)
    self.estimator = advantages.td_k(gamma=task.gamma, margin=1)
    self.actor_net = self.critic_net = self.alpha_net = None

  def build_networks(self):
    obs = networks.example_observation(self.task)
    action = np.zeros((1, 1) + self.task.action_space.shape, np.float32)
    self.actor_net = networks.build_network(
        self.task, GaussianActor(self.hidden, self.dist.n_inputs), *self.optimizers['actor'],
        'actor_loss', (obs,))
    self.critic_net = networks.build_network(
        self.task, TwinCritic(self.hidden), *self.optimizers['critic'], 'critic_loss',
        (obs, action), seed_offset=1)
    self.alpha_net = networks.build_network(
        self.task, LogAlpha(self.initial_alpha), *self.optimizers['alpha'], 'alpha_loss', ())
    return ({'actor': self.actor_net, 'critic': self.critic_net, 'alpha': self.alpha_net},
            Acting('actor', self.dist))

  def train_step(self, carry, rows, key):
    """Critics, then the actor through them, then the temperature, then the targets."""
    nets, targets = carry
    batch = transitions(rows)
    actor, critic, dist = self.actor_net.model, self.critic_net.model, self.dist
    next_key, actor_key = jax.random.split(key)
    noise_shape = batch.action[:, :1].shape
    alpha = jnp.exp(nets['alpha']['params']['log_alpha'])
    # 1. The critics, on soft TD targets from the target critics.
    y = soft_td_targets(dist, actor, critic, variables_of(nets['actor']), targets['critic'],
                        batch, alpha, jax.random.normal(next_key, noise_shape), self.estimator)
    new_critic, critic_step = gradient_step(
        self.critic_net.tx, nets['critic'], lambda v, b: twin_critic_loss(critic, v, b, y), batch)
    # 2. The actor, through the critics as step 1 left them.
    new_actor, actor_step = gradient_step(
        self.actor_net.tx, nets['actor'],
        lambda v, b: actor_loss(dist, actor, critic, v, variables_of(new_critic), b, alpha,
                                jax.random.normal(actor_key, noise_shape)), batch)
    # 3. The temperature, on the entropy of the actor's step.
    new_alpha, alpha_step = gradient_step(
        self.alpha_net.tx, nets['alpha'], temperature_loss, actor_step.metrics['entropy'],
        self.target_entropy)
    # 4. The target critics.
    nets = {'actor': new_actor, 'critic': new_critic, 'alpha': new_alpha}
    return ((nets, polyak(targets, nets, self.traced('tau', self.tau))),
            {'actor': actor_step, 'critic': critic_step, 'alpha': alpha_step})
