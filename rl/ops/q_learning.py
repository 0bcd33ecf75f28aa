"""The pure maths of Q-learning (DQN, DoubleDQN): TD targets, their loss, epsilon-greedy acting.

Arrays are [B, L] as in rl.ops.advantages (Q-values [B, L, n_actions]).
"""
import jax
import jax.numpy as jnp

from rl.ops.advantages import masked_mean


def select_q(q_values, actions):
  """Q(s, a) [B, L] of the taken actions from Q-values [B, L, n_actions]."""
  index = jnp.asarray(actions).astype(jnp.int32)[..., None]
  return jnp.take_along_axis(q_values, index, axis=-1)[..., 0]


def greedy_values(q_target):
  """max_a Q_target(s, a): the bootstrap values of DQN, [B, L]."""
  return jnp.max(q_target, axis=-1)


def double_q_values(q_target, q_online):
  """Q_target(s, argmax_a Q_online(s, a)): Double DQN's bootstrap values, [B, L].

  Letting the network being trained choose the action and the slower target
  network score it removes most of max's overestimation bias.
  """
  best = jnp.argmax(q_online, axis=-1)
  return jnp.take_along_axis(q_target, best[..., None], axis=-1)[..., 0]


def take_rows(x, rows):
  """x[b, rows[b]] of every slice b: [B, L, ...] and [B] -> [B, ...]."""
  index = rows.reshape(rows.shape + (1,) * (x.ndim - 1))
  return jnp.take_along_axis(x, index, axis=1)[:, 0]


def spread_bootstrap_values(values, rows, length):
  """[B, 2] values (first row, bootstrap row) -> [B, length] for an estimator.

  Row 0 keeps its value, row `rows[b]` gets the bootstrap value and every
  other row zero: the estimator weighs those by exact zeros, so the targets
  are the ones of every row's value bit for bit. (A filler equal to the
  bootstrap value would not do: XLA then factors the shared operand out of
  the estimator's sum, which rounds differently.)
  """
  later = jnp.arange(1, length)[None, :] == rows[:, None]
  later = jnp.where(later, values[:, 1:], jnp.zeros((), values.dtype))
  return jnp.concatenate([values[:, :1], later], axis=1)


def q_targets(estimator, rewards, returns, values, dones, mask):
  """Regression targets y [B, L - margin] of the first positions of each slice.

  `estimator` is an rl.ops.advantages estimator (td_k for n-step targets); it
  returns A = y - V, so y = V + A. With td_k of margin n this is
  y_t = sum_{j<J} gamma^j r_{t+j} + gamma^J V(s_{t+J}), where J <= n stops
  early at a termination (no bootstrap) or at the trajectory's final
  observation row (bootstrap from it: a truncation is not an end).
  """
  adv = estimator(rewards, returns, values, dones, mask)
  return values[:, :adv.shape[1]] + adv


def huber(x, delta=1.0):
  """Huber / smooth-L1: x^2 / 2 inside [-delta, delta], linear outside."""
  abs_x = jnp.abs(x)
  return jnp.where(abs_x < delta, 0.5 * x ** 2, delta * (abs_x - 0.5 * delta))


def q_regression_loss(q_values, actions, targets, mask, smooth=True):
  """Masked mean of huber (smooth) or squared error of Q(s, a) - y."""
  error = select_q(q_values, actions) - jax.lax.stop_gradient(targets)
  per_step = huber(error) if smooth else error ** 2
  return masked_mean(per_step, mask)


def epsilon_noise(key, shape, n_actions):
  """What an epsilon-greedy draw of `shape` actions takes from `key`: (uniform draws in
  [0, 1) that decide which actions explore, the random actions)."""
  explore_key, action_key = jax.random.split(key)
  return (jax.random.uniform(explore_key, shape),
          jax.random.randint(action_key, shape, 0, n_actions, jnp.int32))


class EpsilonGreedy:
  """The 'distribution' a ValueAgent acts with: its inputs are the Q-values.

  Temperature 0 is greedy; any positive temperature is epsilon-greedy. The
  object holds no epsilon: it changes every epoch, so it is passed in as a
  traced argument and one compiled act function serves the whole run.
  """

  def __init__(self, n_actions):
    self.n_inputs = int(n_actions)

  def sample(self, q_values, key, temperature, epsilon=0.0):
    """argmax Q, replaced with probability epsilon by a uniformly random action (temperature
    > 0); argmax Q at temperature 0."""
    noise = None if temperature == 0 else self.noise(key, jnp.shape(q_values)[:-1])
    return self.sample_given(q_values, noise, temperature, epsilon)

  def noise(self, key, batch_shape):
    """The randomness of one epsilon-greedy draw (`epsilon_noise`)."""
    return epsilon_noise(key, tuple(batch_shape), self.n_inputs)

  def sample_given(self, q_values, noise, temperature, epsilon=0.0):
    """`sample` with `noise` = self.noise(key, batch_shape) drawn already: the same actions."""
    greedy = jnp.argmax(q_values, axis=-1).astype(jnp.int32)
    if temperature == 0:
      return greedy
    uniform, random_actions = noise
    return jnp.where(uniform < epsilon, random_actions, greedy)
