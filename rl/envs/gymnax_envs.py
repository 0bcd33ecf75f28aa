"""JAX-native environments (gymnax): collection, slicing and evaluation as pure functions.

An env id 'gymnax:<id>' (e.g. 'gymnax:CartPole-v1') names one of gymnax's
environments or one of rl's variants of them (rl.envs.partial_observability),
whose reset and step are JAX functions. Acting and stepping then compile
together into one `lax.scan` over an epoch's steps, and the
rollout is turned into the same padded trajectory layout (rl.data.slices.SliceData)
the gymnasium backend fills on the host, so every trainer's batches, losses
and advantages are the same code on both backends (rl.envs.jax_task holds the
task that uses these functions).

The layout of a rollout of T steps of N envs: each env's strip of T steps is
cut into segments at the episode ends (and at the strip's end), and every
segment becomes a stored trajectory of its steps plus one final-observation
row, exactly as the gymnasium task stores them (rl.data.trajectories): `done`
is the termination only, so a truncated episode and a segment cut at the
epoch's end bootstrap from their final observation.
"""
import difflib
import importlib
import importlib.util
import sys
import types
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from rl.data import slices
from rl.envs import packages
from rl.errors import ConfigError

PREFIX = 'gymnax:'


def is_jax_env(env_id):
  """Whether `env_id` names a JAX-native env ('gymnax:<id>')."""
  return isinstance(env_id, str) and env_id.startswith(PREFIX)


class _DeferredModule(types.ModuleType):
  """Stands in sys.modules for a module until one of its attributes is first read.

  The first read imports the real module (which then replaces this one in
  sys.modules) and every read is handed to it, so code that imported the
  stand-in works as with the real module, only later.
  """

  def __init__(self, name):
    super().__init__(name)
    self.__dict__['_real'] = None

  def __getattr__(self, attribute):
    real = self.__dict__['_real']
    if real is None:
      if sys.modules.get(self.__name__) is self:
        del sys.modules[self.__name__]
      real = importlib.import_module(self.__name__)
      self.__dict__['_real'] = real
    return getattr(real, attribute)


# Modules gymnax imports at its import for rendering only (several of its envs
# draw frames with them). Seaborn brings scipy.stats and pandas, seconds of
# start-up, so they load only if something draws.
_RENDERING_MODULES = ('seaborn', 'matplotlib.pyplot')


def _gymnax(env_id):
  """The gymnax module; a ConfigError naming the real failure (for `env_id`) if it cannot import."""
  if 'gymnax' not in sys.modules:
    for name in _RENDERING_MODULES:
      if name not in sys.modules and importlib.util.find_spec(name.split('.')[0]) is not None:
        sys.modules[name] = _DeferredModule(name)
  return packages.import_module('gymnax', 'gymnax', f'env {env_id!r}')


def make(env_id, env_kwargs=None, time_limit=None):
  """(env, params) of JAX-native env `env_id`; ConfigError with close ids if unknown.

  env_kwargs: fields of the env's parameters to override (e.g.
  {'max_steps_in_episode': 200}); time_limit overrides max_steps_in_episode.
  """
  gymnax = _gymnax(env_id)
  # rl's own variants of gymnax envs (e.g. 'gymnax:CartPoleNoVel-v1') sit beside gymnax's ids.
  from rl.envs import partial_observability  # pylint: disable=import-outside-toplevel
  own = partial_observability.GYMNAX_ENVS
  name = env_id[len(PREFIX):]
  if name not in gymnax.registered_envs and name not in own:
    close = difflib.get_close_matches(name, [*gymnax.registered_envs, *own], n=3, cutoff=0.5)
    hint = (f" Did you mean {', '.join(repr(PREFIX + c) for c in close)}?" if close else
            f" Known ids: {', '.join(PREFIX + e for e in gymnax.registered_envs[:6])}, ...")
    raise ConfigError(f'unknown JAX-native env id {env_id!r}.{hint}')
  env, params = own[name]() if name in own else gymnax.make(name)
  overrides = dict(env_kwargs or {})
  if time_limit is not None:
    overrides['max_steps_in_episode'] = int(time_limit)
  unknown = sorted(set(overrides) - set(getattr(params, '__dataclass_fields__', {})))
  if unknown:
    raise ConfigError(f"{env_id} has no parameter {', '.join(map(repr, unknown))} (RLTask."
                      f"env_kwargs); its parameters are {', '.join(params.__dataclass_fields__)}.")
  if overrides:
    params = params.replace(**overrides)
  return env, params


def gymnasium_space(space):
  """The gymnasium space of a gymnax space (Discrete or Box), which the trainers read."""
  import gymnasium as gym  # pylint: disable=import-outside-toplevel
  if hasattr(space, 'n') and not hasattr(space, 'low'):
    return gym.spaces.Discrete(int(space.n))
  if hasattr(space, 'low') and hasattr(space, 'shape'):
    dtype = np.dtype(space.dtype)
    low = np.broadcast_to(np.asarray(space.low, dtype), space.shape)
    high = np.broadcast_to(np.asarray(space.high, dtype), space.shape)
    return gym.spaces.Box(low, high, tuple(space.shape), dtype)
  raise ConfigError(f'JAX-native env space {space} is not supported (Discrete or Box only).')


class EnvCarry(NamedTuple):
  """What collection carries from one step (and epoch) to the next."""
  state: Any  # the envs' states, batched over envs (a pytree)
  obs: jax.Array  # [N, ...] the observations the next step acts on
  episode_return: jax.Array  # [N] undiscounted return of each running episode so far
  key: jax.Array  # the envs' randomness (steps and resets)


class Rollout(NamedTuple):
  """T steps of N envs, each field [T, N, ...]."""
  observation: jax.Array  # at the start of the step
  action: jax.Array
  reward: jax.Array
  dist_inputs: jax.Array  # of the acting policy
  terminated: jax.Array  # the episode ended in a terminal state at this step
  ended: jax.Array  # terminated or truncated: the env was reset after this step
  final_obs: jax.Array  # the observation after the step, before any reset
  episode_return: jax.Array  # the return of the episode that ended here (0 elsewhere)


def reset(env, params, key, n_envs, obs_dtype):
  """An EnvCarry of `n_envs` freshly reset envs (pure); observations cast to `obs_dtype`."""
  key, reset_key = jax.random.split(key)
  obs, state = jax.vmap(env.reset, in_axes=(0, None))(jax.random.split(reset_key, n_envs),
                                                      params)
  # gymnax leaves fields set from Python numbers weakly typed (an env's `time`); a state restored
  # from a checkpoint is not, and the epoch's program would compile again for it on a resume.
  state = jax.tree_util.tree_map(lambda x: jnp.asarray(x, x.dtype), state)
  return EnvCarry(state, obs.astype(obs_dtype), jnp.zeros(n_envs, jnp.float32), key)


def _clip_fn(action_space):
  """Box actions are stored as sampled but the env gets them clipped to its bounds."""
  if not hasattr(action_space, 'low'):
    return lambda a: a
  low, high = np.asarray(action_space.low), np.asarray(action_space.high)
  return lambda a: jnp.clip(a, low, high)


def key_chain(key, n):
  """What `n` successive `key, sub = jax.random.split(key)` give: (the last key, subs [n]); pure."""
  def split(key, _):
    key, sub = jax.random.split(key)
    return key, sub
  return jax.lax.scan(split, key, None, length=n)


def rollout(env, params, action_space, act_fn, noise_fn, policy_params, acting, carry,
            sample_args, n_steps):
  """`n_steps` steps of every env, acting with `act_fn` (pure): (acting, carry, Rollout).

  act_fn(policy_params, acting, obs, sample_args, noise=...) -> (actions,
  dist_inputs, acting) is the trainer's acting function (rl.learner.acting.act
  with its temperature and normaliser update bound); noise_fn(key,
  batch_shape) draws the randomness of one of its samples (the distribution's
  `noise`).

  Every step's keys (the acting key's and the envs') are split, and its
  sampling noise drawn, before the step loop: the same keys and actions as
  splitting and drawing step by step. A step then holds no key arithmetic
  beside the network and the env, which XLA would run on a second thread;
  on CPU those hand-overs cost more than the arithmetic (docs/performance.md).
  """
  clip = _clip_fn(action_space)
  n_envs = carry.obs.shape[0]
  step = jax.vmap(env.step, in_axes=(0, 0, 0, None))
  acting_key, sample_keys = key_chain(acting.key, n_steps)
  noise = jax.vmap(lambda k: noise_fn(k, (n_envs,)))(sample_keys)
  env_key, step_keys = key_chain(carry.key, n_steps)
  env_keys = jax.vmap(lambda k: jax.random.split(k, n_envs))(step_keys)

  def one_step(loop, drawn):
    acting, carry = loop
    noise, step_keys = drawn
    actions, dist_inputs, acting = act_fn(policy_params, acting, carry.obs, sample_args,
                                          noise=noise)
    obs, state, reward, terminated, truncated, info = step(
        step_keys, carry.state, clip(actions), params)
    reward = reward.astype(jnp.float32)
    ended = terminated | truncated
    episode_return = carry.episode_return + reward
    record = Rollout(carry.obs, actions, reward, dist_inputs, terminated, ended,
                     info['final_observation'].astype(carry.obs.dtype),
                     jnp.where(ended, episode_return, 0.0))
    carry = EnvCarry(state, obs.astype(carry.obs.dtype),
                     jnp.where(ended, 0.0, episode_return), carry.key)
    return (acting, carry), record

  (acting, carry), record = jax.lax.scan(one_step, (acting, carry), (noise, env_keys),
                                         length=n_steps)
  return acting._replace(key=acting_key), carry._replace(key=env_key), record


def rollout_capacity(n_steps, n_envs):
  """Rows of a rollout's SliceData: every step may end a segment, adding a final row."""
  return 1 << max(1, (2 * n_steps * n_envs - 1).bit_length())


def rollout_slices(rollout_data, gamma):
  """The Rollout as a SliceData of its segments, laid out as the host's stored epochs (pure).

  Returns (SliceData, n_segments).
  """
  fields = jax.tree_util.tree_map(lambda x: jnp.swapaxes(x, 0, 1), rollout_data)  # [N, T]
  n_envs, n_steps = fields.reward.shape
  size = rollout_capacity(n_steps, n_envs)
  last = jnp.arange(n_steps) == n_steps - 1
  seg_end = fields.ended | last[None, :]  # a segment ends here (episode end or strip end)
  extra = seg_end.astype(jnp.int32)
  # Row of each step in its strip: the step count plus the final rows before it.
  position = jnp.arange(n_steps)[None, :] + jnp.cumsum(extra, axis=1) - extra
  strip_rows = n_steps + extra.sum(axis=1)
  step_row = (jnp.cumsum(strip_rows) - strip_rows)[:, None] + position
  final_row = jnp.where(seg_end, step_row + 1, size)  # `size`: no final row (dropped)
  seg_start = jnp.concatenate([jnp.ones((n_envs, 1), bool), seg_end[:, :-1]], axis=1)
  segment = (jnp.cumsum(seg_start.reshape(-1)) - 1).reshape(n_envs, n_steps)

  def returns(reward, seg_end):
    def back(after, x):
      r, end = x
      g = r + gamma * jnp.where(end, 0.0, after)
      return g, g
    return jax.lax.scan(back, jnp.float32(0.0), (reward, seg_end), reverse=True)[1]

  def scatter(step_values, final_values=None):
    step_values = jnp.asarray(step_values)
    out = jnp.zeros((size,) + step_values.shape[2:], step_values.dtype)
    out = out.at[step_row.reshape(-1)].set(step_values.reshape((-1,) + step_values.shape[2:]))
    if final_values is not None:
      out = out.at[final_row.reshape(-1)].set(
          final_values.reshape((-1,) + final_values.shape[2:]), mode='drop')
    return out

  rows = {
      'observation': scatter(fields.observation, fields.final_obs),
      'action': scatter(fields.action),
      'reward': scatter(fields.reward),
      'done': scatter(fields.terminated.astype(jnp.float32)),
      'mask': scatter(jnp.ones((n_envs, n_steps), jnp.float32)),
      'dist_inputs': scatter(fields.dist_inputs.astype(jnp.float32)),
      'return_': scatter(jax.vmap(returns)(fields.reward, seg_end)),
  }
  n_slots = size // 2
  flat_segment = segment.reshape(-1)
  traj_start = jnp.zeros(n_slots, jnp.int32).at[
      jnp.where(seg_start, segment, n_slots).reshape(-1)].set(
          step_row.reshape(-1).astype(jnp.int32), mode='drop')
  traj_rows = jnp.zeros(n_slots, jnp.int32).at[flat_segment].add(
      1 + extra.reshape(-1))
  seg_row_end = (traj_start + traj_rows)[segment]
  row_end = jnp.zeros(size, jnp.int32).at[step_row.reshape(-1)].set(seg_row_end.reshape(-1))
  row_end = row_end.at[final_row.reshape(-1)].set(seg_row_end.reshape(-1), mode='drop')
  data = slices.SliceData(rows, row_end, traj_start, traj_rows)
  return data, jnp.sum(seg_start)


def step_without_reset(env):
  """env's step(key, state, action, params) -> (obs, state, reward, terminated, truncated)
  without the auto-reset of gymnax's `Environment.step`, for episodes played once.

  An evaluation stops counting an env at its episode's end, so the reset
  that gymnax's step computes at every step (and keeps only at an end) is
  half of the play loop's work for nothing. The step's own key is the one
  gymnax's step hands `step_env` (the first of the key's split), so a
  running episode goes exactly as under `env.step`
  (tests/test_gymnax_play.py). An env whose class has its own `step`
  (e.g. bsuite's DeepSea), or is no gymnax Environment, keeps that step.
  """
  from gymnax.environments import environment  # pylint: disable=import-outside-toplevel
  if getattr(type(env), 'step', None) is not environment.Environment.step:
    return lambda key, state, action, params: env.step(key, state, action, params)[:5]

  def step(key, state, action, params):
    step_key, _ = jax.random.split(key)
    obs, state, reward, terminated, _ = env.step_env(step_key, state, action, params)
    return obs, state, reward, terminated, env.is_truncated(state, params)
  return step


def play(env, params, action_space, obs_dtype, act_fn, policy_params, acting, key, sample_args,
         *, n_episodes, max_steps):
  """Returns [n_episodes] of one episode per env, reset from `key`'s split (pure).

  The envs step together until every episode has ended (or `max_steps`);
  an env whose episode ended stops adding rewards.
  """
  clip = _clip_fn(action_space)
  carry = reset(env, params, key, n_episodes, obs_dtype)
  step = jax.vmap(step_without_reset(env), in_axes=(0, 0, 0, None))

  def cond(loop):
    _, _, _, running, t = loop
    return jnp.any(running) & (t < max_steps)

  def body(loop):
    acting, carry, returns, running, t = loop
    actions, _, acting = act_fn(policy_params, acting, carry.obs, sample_args)
    key, step_key = jax.random.split(carry.key)
    obs, state, reward, terminated, truncated = step(
        jax.random.split(step_key, n_episodes), carry.state, clip(actions), params)
    returns = returns + jnp.where(running, reward.astype(jnp.float32), 0.0)
    running = running & ~(terminated | truncated)
    return acting, carry._replace(state=state, obs=obs.astype(carry.obs.dtype), key=key), \
        returns, running, t + 1

  loop = (acting, carry, jnp.zeros(n_episodes, jnp.float32), jnp.ones(n_episodes, bool),
          jnp.int32(0))
  return jax.lax.while_loop(cond, body, loop)[2]
