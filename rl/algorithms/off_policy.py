"""What the off-policy continuous-control trainers share: replay, critics, target networks.

OffPolicyTrainer is the base of SAC (rl/algorithms/sac.py) and of the DDPG
example (docs/examples/ddpg.py): its replay keeps the last n_replay_epochs
epochs of transitions, and an epoch's update is train_steps_per_epoch calls
of the subclass's `train_step(carry, rows, key)` on minibatches of 2-row
slices (s_t, a_t, r_t and the row after), with the carry (the networks,
their target parameters) threaded through `fused_epoch`. The target
parameters live in `state.extra['targets']`, so checkpoints hold them.
"""
from typing import NamedTuple

import flax.linen as nn
import jax
import jax.numpy as jnp
import optax

from rl.data import slices
from rl.errors import ConfigError
from rl.learner.fused_epoch import fused_epoch
from rl.learner.trainer import RLTrainer
from rl.nets.mlp import MLPModule

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
    batch_size: transitions per gradient step; at most what the replay holds
      (n_replay_epochs x n_interactions_per_epoch).
    train_steps_per_epoch: gradient steps per epoch (each steps every network once).
    tau: how far the target networks move toward the trained ones per gradient step.
    n_replay_epochs: the latest epochs of transitions the replay keeps.
    **kwargs: RLTrainer's arguments (n_interactions_per_epoch, n_eval_episodes, ...).
  """

  supports_jax_envs = True
  target_networks = ('actor', 'critic')

  def __init__(self, task, batch_size=256, train_steps_per_epoch=1000, tau=0.005,
               n_replay_epochs=1000, **kwargs):
    name = type(self).__name__
    space = task.action_space
    if not hasattr(space, 'low'):
      raise ConfigError(f'{name} needs a continuous (Box) action space, but {task.env_name} '
                        f'has {space}. For discrete actions use {_DISCRETE_TRAINERS}.')
    super().__init__(task, **kwargs)
    if int(n_replay_epochs) < 1:
      raise ConfigError(f'{name}.n_replay_epochs must be >= 1, got {n_replay_epochs}.')
    n_interactions = self.options.n_interactions
    if n_interactions is not None and batch_size > n_replay_epochs * n_interactions:
      raise ConfigError(
          f'{name}.batch_size ({batch_size}) is more than the replay holds: n_replay_epochs '
          f'({n_replay_epochs}) x n_interactions_per_epoch ({n_interactions}) = '
          f'{n_replay_epochs * n_interactions} transitions. Lower batch_size or raise '
          'n_replay_epochs.')
    self.batch_size, self.train_steps, self.tau = int(batch_size), int(train_steps_per_epoch), tau
    self.n_replay_epochs = int(n_replay_epochs)

  def initial_extra(self, nets):
    return {'targets': {name: nets[name].variables['params'] for name in self.target_networks}}

  def epoch_data(self, epoch):
    del epoch
    return self.task.slice_data()

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
    (nets, targets), key, records = fused_epoch(
        self.train_step, (state.nets, state.extra['targets']),
        (data, slices.draw_table(data, 2, 1)), state.train_key, draw=self.draw,
        take=slices.take_slices, n_chunks=1, steps_per_chunk=self.train_steps)
    state = state._replace(nets=nets, train_key=key, extra=dict(state.extra, targets=targets))
    return state, records, {}
