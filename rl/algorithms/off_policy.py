"""What the off-policy continuous-control trainers share: replay, critics, target networks.

OffPolicyTrainer is the base of SAC (rl/algorithms/sac.py), TD3
(rl/algorithms/td3.py) and the DDPG example (docs/examples/ddpg.py): its
replay keeps the last n_replay_epochs epochs of transitions, and an epoch's
update is train_steps_per_epoch calls of the subclass's `train_step(carry,
rows, key)` on minibatches of 2-row slices (s_t, a_t, r_t and the row
after), with the carry (the networks, their target parameters) threaded
through `fused_epoch`. The target parameters live in
`state.extra['targets']`, so checkpoints hold them.
"""
from typing import NamedTuple

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import optax

from rl import ranges
from rl.data import replay_ring
from rl.data import slices
from rl.errors import ConfigError
from rl.learner.fused_epoch import fused_epoch
from rl.learner.trainer import RLTrainer
from rl.nets.mlp import MLPModule
from rl.ops.advantages import masked_mean
from rl.ops.q_learning import q_targets

# The trainers that act in discrete action spaces, for the error message.
_DISCRETE_TRAINERS = 'DQN, DoubleDQN, PPO or A2C'


class Transitions(NamedTuple):
  """Slices of 2 rows: (s_t, a_t, r_t) and the row after, which the TD target bootstraps from."""
  observation: jax.Array  # [B, 2, ...]
  action: jax.Array
  reward: jax.Array
  return_: jax.Array
  done: jax.Array
  mask: jax.Array


def transitions(rows):
  """The Transitions of a minibatch's rows (a dict field -> [B, 2, ...])."""
  return Transitions(*(rows[field] for field in Transitions._fields))


class Critic(nn.Module):
  """Q(s, a) [B, L]: an MLP on the observation and action joined."""
  hidden: tuple

  @nn.compact
  def __call__(self, obs, action):
    joined = jnp.concatenate([obs.reshape(obs.shape[:2] + (-1,)),
                              action.reshape(action.shape[:2] + (-1,))], axis=-1)
    return nn.Dense(1)(MLPModule(self.hidden)(joined))[..., 0]


class TwinCritic(nn.Module):
  """Two independent critics Q1, Q2 of (s, a), stacked: [2, B, L].

  The min of the two is the clipped double-Q estimate of SAC and TD3 (Fujimoto
  et al., 2018): each critic overestimates where its errors are high, and the
  min keeps the bootstrap from compounding that.
  """
  hidden: tuple

  @nn.compact
  def __call__(self, obs, action):
    return jnp.stack([Critic(self.hidden, name=f'q{i}')(obs, action) for i in (1, 2)])


class DeterministicActor(nn.Module):
  """mu(s): an MLP, then tanh scaled to the action bounds, [B, L, *action_shape]."""
  hidden: tuple
  low: tuple
  high: tuple

  @nn.compact
  def __call__(self, obs):
    low, high = np.asarray(self.low, np.float32), np.asarray(self.high, np.float32)
    x = nn.Dense(low.size)(MLPModule(self.hidden)(obs))
    return (low + high) / 2 + (high - low) / 2 * jnp.tanh(x).reshape(x.shape[:2] + low.shape)


def bootstrapped_targets(estimator, batch, next_values):
  """y [B, 1] of the first rows from `next_values` [B, 1], the values of the rows after them.

  The first rows' own values are zeros, so y is exactly r + gamma V(s_t+1) (no
  bootstrap past a termination; the estimator, td_k, adds and subtracts them).
  """
  values = jnp.concatenate([jnp.zeros_like(next_values), next_values], axis=1)
  return q_targets(estimator, batch.reward, batch.return_, values, batch.done, batch.mask)


def twin_critic_loss(critic, variables, batch, targets):
  """The twin critics' squared TD errors on the real first rows, summed over the two."""
  q = critic.apply(variables, batch.observation[:, :1], batch.action[:, :1])  # [2, B, 1]
  mask = batch.mask[:, :1]
  loss = masked_mean((q[0] - targets) ** 2, mask) + masked_mean((q[1] - targets) ** 2, mask)
  return loss, {'critic_loss': loss, 'q_mean': masked_mean(jnp.mean(q, axis=0), mask)}


def polyak(targets, nets, tau):
  """Each target's parameters moved a fraction tau toward its network's."""
  return {name: optax.incremental_update(nets[name]['params'], target, tau)
          for name, target in targets.items()}


class OffPolicyTrainer(RLTrainer):
  """A replay of transitions, minibatch gradient steps of several networks, target networks.

  Subclasses build the networks and write `train_step(carry, rows, key) ->
  ((nets, targets), {network: NetworkStep})`; `target_networks` names the
  networks whose parameters have a Polyak-averaged target copy.

  Args:
    task: the RLTask.
    hidden: widths of the hidden layers of the actor and of each critic.
    actor_optimizer: the actor's optimizer factory (gin: @Adam, ...); None: @Adam.
    actor_lr_schedule: the actor's learning-rate schedule factory (e.g. a scoped
      @actor/multifactor); None: @multifactor.
    critic_optimizer: the critics' optimizer factory (one for all); None: @Adam.
    critic_lr_schedule: the critics' learning-rate schedule factory; None: @multifactor.
    batch_size: transitions per gradient step; at most what the replay holds
      (n_replay_epochs x n_interactions_per_epoch).
    train_steps_per_epoch: gradient steps per epoch (each steps every network once).
    tau: how far the target networks move toward the trained ones per gradient step.
    n_replay_epochs: the latest epochs of transitions the replay keeps.
    learning_starts: env steps acted uniformly at random over the action box
      before the policy acts (whole epochs: an epoch acts at random when the
      env steps before it are fewer); needs n_interactions_per_epoch, and an
      acting distribution with a `uniform` sampling argument (SAC's, TD3's).
    **kwargs: RLTrainer's arguments (n_interactions_per_epoch, n_eval_episodes, ...).
  """

  supports_jax_envs = True
  target_networks = ('actor', 'critic')

  def __init__(self, task, hidden=(256, 256), actor_optimizer=None, actor_lr_schedule=None,
               critic_optimizer=None, critic_lr_schedule=None, batch_size=256,
               train_steps_per_epoch=1000, tau=0.005, n_replay_epochs=1000, learning_starts=0,
               **kwargs):
    name = type(self).__name__
    space = task.action_space
    if not hasattr(space, 'low'):
      raise ConfigError(f'{name} needs a continuous (Box) action space, but {task.env_name} '
                        f'has {space}. For discrete actions use {_DISCRETE_TRAINERS}.')
    initial = getattr(task, 'initial_trajectories', 0)  # JAX-native tasks refuse it themselves
    if initial:
      # Random trajectories are stored with the acting distribution's inputs, which neither
      # SAC's squashed Gaussian nor TD3's deterministic actor has for uniform actions;
      # learning_starts acts at random inside the epochs instead.
      raise ConfigError(
          f'RLTask.initial_trajectories = {initial} is not supported by {name}; its random '
          f'first steps are {name}.learning_starts (env steps acted uniformly over the action '
          f'box): bind e.g. {name}.learning_starts = 1000 and remove '
          'RLTask.initial_trajectories.')
    super().__init__(task, **kwargs)
    ranges.in_range(f'{name}.n_replay_epochs', n_replay_epochs, low=1)
    ranges.in_range(f'{name}.batch_size', batch_size, low=1)
    ranges.in_range(f'{name}.train_steps_per_epoch', train_steps_per_epoch, low=1)
    ranges.in_range(f'{name}.tau', tau, low=0, high=1, low_open=True,
                    why='the step of the target networks toward the trained ones')
    ranges.in_range(f'{name}.learning_starts', learning_starts, low=0)
    n_interactions = self.options.n_interactions
    if n_interactions is not None and batch_size > n_replay_epochs * n_interactions:
      raise ConfigError(
          f'{name}.batch_size ({batch_size}) is more than the replay holds: n_replay_epochs '
          f'({n_replay_epochs}) x n_interactions_per_epoch ({n_interactions}) = '
          f'{n_replay_epochs * n_interactions} transitions. Lower batch_size or raise '
          'n_replay_epochs.')
    if learning_starts and n_interactions is None:
      raise ConfigError(f'{name}.learning_starts counts env steps in whole epochs: set '
                        f'{name}.n_interactions_per_epoch (or learning_starts = 0).')
    self.hidden = tuple(int(w) for w in hidden)
    # Each network's (optimizer factory, learning-rate schedule factory).
    self.optimizers = {'actor': (actor_optimizer, actor_lr_schedule),
                       'critic': (critic_optimizer, critic_lr_schedule)}
    self.batch_size, self.train_steps, self.tau = int(batch_size), int(train_steps_per_epoch), tau
    self.n_replay_epochs = int(n_replay_epochs)
    self.learning_starts = int(learning_starts)

  def initial_extra(self, nets):
    return {'targets': {name: nets[name].variables['params'] for name in self.target_networks}}

  def sampling_args(self, temperature, epoch):
    """The acting distribution's `uniform`: 1 in the collection of the epochs that start before
    learning_starts env steps; none without learning_starts."""
    if not self.learning_starts:
      return ()
    before = (epoch - 1) * self.options.n_interactions < self.learning_starts
    return (np.float32(temperature > 0 and before),)

  def epoch_data(self, epoch):
    del epoch
    return self.task.replay()  # the device ring, which only the newest epoch is written to

  def rollout_data(self, newest, replay, epoch):
    del newest, epoch
    return replay

  def draw(self, data, key):
    data, table = data
    return slices.draw(data, key, self.batch_size, 2, margin=1, table=table)

  def train_step(self, carry, rows, key):
    """One gradient step of every network on one minibatch: ((nets, targets), steps); pure."""
    raise NotImplementedError

  def update(self, state, data):
    data = replay_ring.as_slices(data)
    (nets, targets), key, records = fused_epoch(
        self.train_step, (state.nets, state.extra['targets']),
        (data, slices.draw_table(data, 2, 1)), state.train_key, draw=self.draw,
        take=slices.take_slices, n_chunks=1, steps_per_chunk=self.train_steps)
    state = state._replace(nets=nets, train_key=key, extra=dict(state.extra, targets=targets))
    return state, records, {}
