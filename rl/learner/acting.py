"""Acting: how an algorithm's acting network picks actions, as pure and compiled functions."""
import functools
from typing import Any, Callable, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from rl import compiler
from rl.learner.state import ActingState


class Acting(NamedTuple):
  """What an algorithm declares about how it acts."""
  network: str  # the name of the network whose outputs parametrise the actions
  dist: Any  # the action distribution (rl.ops.distributions, or DQN's epsilon-greedy)
  output_fn: Callable = lambda out: out  # model output -> dist_inputs [B, L, k]


def act(apply_fn, dist, output_fn, params, acting_state, obs, sample_args, temperature,
        update, noise=None):
  """One batched action: (actions, dist_inputs, acting_state); pure.

  Args:
    apply_fn, dist, output_fn: the acting model's apply, its distribution and
      model output -> dist_inputs [B, L, k] (bound before jitting).
    params: the acting parameters.
    acting_state: an ActingState.
    obs: [B, ...] observations.
    sample_args: extra traced arguments of `dist.sample` (e.g. epsilon).
    temperature: sampling temperature (0: greedy).
    update: fold `obs` into the normaliser statistics (training collection).
    noise: the sample's randomness (`dist.noise`), when the caller drew it
      already from a key split off the acting key (rl.envs.gymnax_envs.rollout);
      the state's key is then returned as it came. None: a key is split off here.
  """
  model_state = acting_state.model_state
  variables = {'params': params, **model_state}
  if update and model_state:
    out, model_state = apply_fn(variables, obs[:, None], update_normalizer=True,
                                mutable=list(model_state))
    model_state = dict(model_state)
  else:
    out = apply_fn(variables, obs[:, None])
  dist_inputs = output_fn(out)[:, -1]
  key = acting_state.key
  if noise is None:
    key, sample_key = jax.random.split(key)
    actions = dist.sample(dist_inputs, sample_key, temperature, *sample_args)
  else:
    actions = dist.sample_given(dist_inputs, noise, temperature, *sample_args)
  return actions, dist_inputs, ActingState(key, model_state)


class HostPolicy:
  """Adapts a pure acting function to a host env loop: obs -> (actions, dist_inputs).

  The env loop steps on the host, one batched call per step; this object
  threads the acting state through those calls, and `state` is read back once
  the loop is over.
  """

  def __init__(self, act_fn, params, state, sample_args, pure=None):
    self._act = act_fn
    self.params = params
    self.sample_args = sample_args
    self.state = state
    # The same acting function unjitted (its static arguments bound), for a
    # caller that traces it into its own compiled loop (JaxTask's evaluation).
    self.pure = pure

  def __call__(self, obs):
    actions, dist_inputs, self.state = self._act(self.params, self.state, obs,
                                                 self.sample_args)
    return np.asarray(actions), np.asarray(dist_inputs)


class Actor:
  """The compiled acting functions of one network: training collection and evaluation."""

  def __init__(self, network, acting):
    self.dist = acting.dist
    self.pure = functools.partial(act, network.model.apply, acting.dist, acting.output_fn)
    self._jitted = compiler.jit(self.pure, static_argnames=('temperature', 'update'))
    # The collect loop's call, with its static arguments bound once: dispatch
    # then skips hashing keyword arguments on every env step.
    self._collect = compiler.jit(functools.partial(self.pure, temperature=1.0, update=True))
    self._eval_pures = {}

  def share_programs(self, other):
    """Acts with `other`'s compiled functions (an Actor of the same config), so nothing
    compiles twice."""
    self.pure, self._jitted, self._collect = other.pure, other._jitted, other._collect
    self._eval_pures = other._eval_pures

  def collect_policy(self, params, state, sample_args):
    """The policy of training collection: temperature 1, normaliser statistics updated."""
    return HostPolicy(self._collect, params, state, sample_args)

  def eval_policy(self, params, state, temperature, sample_args):
    """A policy at `temperature` whose normaliser statistics stay frozen."""
    act_fn = functools.partial(self._jitted, temperature=temperature, update=False)
    return HostPolicy(act_fn, params, state, sample_args, pure=self.eval_pure(temperature))

  def eval_pure(self, temperature):
    """The pure acting function of evaluation at `temperature`: one object per temperature,
    so that a caller compiling it keeps one program."""
    return self._eval_pures.setdefault(
        temperature, functools.partial(self.pure, temperature=temperature, update=False))

  def random_policy(self, task, state):
    """The policy of the random initial trajectories (RLTask.initial_trajectories).

    Discrete actions are uniform draws from the task's generator, stored with
    zero logits. Continuous actions come from the acting Gaussian at
    `spread_inputs` (wide, centred on the box) with the collection key, and
    those inputs are stored: off-policy losses then see the density the
    actions were really drawn from.
    """
    dist = self.dist
    if not hasattr(dist, 'spread_inputs'):
      return task.random_policy
    inputs = dist.spread_inputs(task.action_space)

    def spread(params, state, obs, sample_args):
      del params, sample_args
      dist_inputs = jnp.broadcast_to(inputs, (obs.shape[0], inputs.shape[0]))
      key, sample_key = jax.random.split(state.key)
      return dist.sample(dist_inputs, sample_key, 1.0), dist_inputs, state._replace(key=key)
    return HostPolicy(spread, None, state, ())


def initial_acting_state(key, network):
  """The acting state at the start: the collection key and the acting network's statistics."""
  return ActingState(key, jax.tree_util.tree_map(jnp.asarray, dict(network.model_state)))
