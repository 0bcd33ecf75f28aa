"""Q-value baselines of the actor-critics (ActorCriticTrainer.q_value, SamplingAWR).

With `q_value` the value network is Q(s, a); a state's value is an
aggregate of Q over actions sampled from the stored behaviour policy (or over
every action, when the samples enumerate them).
"""
import jax.numpy as jnp

from rl.errors import ConfigError
from rl.ops import q_values as q_values_lib


def parse_aggregate(trainer_name, aggregate, aggregate_max):
  """The aggregate's name from q_value_aggregate or its boolean alias, or a one-line error."""
  if aggregate_max is not None:
    if aggregate is not None:
      raise ConfigError(f'{trainer_name}: give q_value_aggregate or its old alias '
                        'q_value_aggregate_max, not both.')
    aggregate = 'max' if aggregate_max else 'mean'
  aggregate = aggregate or 'logsumexp'
  if aggregate not in q_values_lib.AGGREGATES:
    raise ConfigError(f"{trainer_name}.q_value_aggregate must be one of "
                      f"{', '.join(q_values_lib.AGGREGATES)}; got '{aggregate}'.")
  return aggregate


class QBaseline:
  """How state values come from a Q network: which actions, how many, aggregated how.

  Args:
    trainer_name: named in error messages.
    task: the RLTask (its action space).
    dist: the policy's action distribution.
    aggregate: 'mean' | 'max' | 'softmax' | 'logsumexp' (see parse_aggregate).
    temperature: temperature of 'softmax' and 'logsumexp'.
    n_samples: actions sampled per state; equal to the number of discrete
      actions (or 'all') enumerates every action.
  """

  def __init__(self, trainer_name, task, dist, aggregate, temperature, n_samples):
    name, space = trainer_name, task.action_space
    self.n_actions = int(space.n) if hasattr(space, 'n') else None
    self.sample_all = n_samples == 'all' or n_samples == self.n_actions
    if n_samples == 'all' and self.n_actions is None:
      raise ConfigError(f'{name}: q_value_n_samples = all actions needs a Discrete action '
                        f'space, but {task.env_name} has {space}; sample a number instead.')
    if not (hasattr(space, 'n') or len(space.shape) == 1):
      raise ConfigError(f'{name}: q_value supports Discrete or 1-D Box action spaces, '
                        f'not {space}.')
    if not self.sample_all and (not isinstance(n_samples, int) or n_samples < 1):
      raise ConfigError(f"{name}.q_value_n_samples must be a positive integer or 'all', "
                        f'got {n_samples!r}.')
    self.aggregate = aggregate
    self.temperature = float(temperature)
    self.n_samples = self.n_actions if self.sample_all else n_samples
    self.dist = dist

  def sample_actions(self, dist_inputs, key):
    """n actions per state [B, n, L] and their log-probs under the stored policy."""
    dist = self.dist
    batch, length = dist_inputs.shape[:2]
    n = self.n_samples
    if self.sample_all:
      actions = jnp.broadcast_to(jnp.arange(n)[None, :, None], (batch, n, length))
    else:
      tiled = jnp.broadcast_to(dist_inputs[:, None], (batch, n) + dist_inputs.shape[1:])
      actions = dist.sample(tiled, key, 1.0)
    log_probs = dist.log_prob(jnp.broadcast_to(dist_inputs[:, None], (batch, n) +
                                               dist_inputs.shape[1:]), actions)
    return actions, log_probs

  def state_values(self, q_fn, dist_inputs, key, mode):
    """V(s) [B, L]: Q (`q_fn(actions) -> [B, n, L]`) aggregated over sampled actions."""
    actions, log_probs = self.sample_actions(dist_inputs, key)
    return q_values_lib.aggregate(q_fn(actions), log_probs, mode, self.temperature,
                                  self.sample_all)
