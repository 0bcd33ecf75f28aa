"""Advantage estimators over batches of trajectory slices.

Each estimator factory is gin-configurable, `f(gamma, margin, [lambda_]) ->
Estimator`; `estimator(rewards, returns, values, dones, mask)` takes `[B, L]`
arrays (jnp or numpy) and returns advantages of shape `[B, L - margin]`: the
last `margin` rows of a slice only look ahead and get no advantage of their
own. Estimators are pure (inputs are never written to) and jit-able.

Row conventions (row t of a slice is one time step):
  rewards[t]  reward for the action taken at row t.
  returns[t]  discounted Monte-Carlo return from row t to the end of the stored
              trajectory, with no bootstrap.
  values[t]   value estimate of the observation at row t. The trajectory's final
              observation has a row too, so its value is available.
  dones[t]    1 iff the step at row t *terminated* the episode (gymnasium's
              `terminated`). A time-limit `truncated` end is NOT a done.
  mask[t]     1 for real steps; 0 for the row holding a trajectory's final
              observation and for padding after it.

Consequences:
  * Termination at row t: nothing after row t contributes to the targets of
    rows <= t (no bootstrap).
  * A real, not-done row t followed by a mask-0 row t+1 means the trajectory
    was cut there (time-limit truncation or the end of the collected data),
    so values[t+1] -- the value of the final observation -- is the bootstrap.
  * Rows after the first mask-0 row never influence real rows, so whatever
    the task writes into padding is harmless.

Where this differs from the reference (Trax RL), on purpose:
  * the reference marks truncated ends as done (no bootstrap) and pads with
    done=True; here only termination stops bootstrapping and the mask tells
    real rows from the rest;
  * the reference's `monte_carlo` mutates its inputs; nothing here does;
  * the reference's `td_k` ignores dones inside its window; here accumulation
    stops at a termination;
  * per-step discount masks (EnvInfo.discount_mask) are not supported.
"""

import dataclasses
import functools
from typing import Callable, Optional

import gin
import jax
import jax.numpy as jnp
import numpy as np

from rl import ranges
from rl import traced_values
from rl.configurables import configurable
from rl.errors import ConfigError


def _check_margin(margin):
  if int(margin) != margin or margin < 0:
    raise ConfigError(f"margin must be an integer >= 0, got {margin!r}.")
  return int(margin)


def _as_arrays(rewards, returns, values, dones, mask):
  """The inputs as float jnp arrays of one [B, L] shape (checked at trace time).

  Working on jnp values (immutable) is what keeps the estimators pure: the
  caller's numpy buffers are never written to, unlike the reference's.
  """
  arrays = [jnp.asarray(x) for x in (rewards, returns, values, dones, mask)]
  shape = arrays[0].shape
  if len(shape) != 2 or any(a.shape != shape for a in arrays):
    shapes = [a.shape for a in arrays]
    raise ValueError(
        "rewards, returns, values, dones and mask must all have the same "
        f"shape [B, L]; got {shapes}.")
  dtype = jnp.promote_types(jnp.result_type(arrays[0], arrays[2]), jnp.float32)
  return [a.astype(dtype) for a in arrays]


def _trim(x, margin):
  length = x.shape[1]
  if margin > length:
    raise ValueError(f"margin {margin} exceeds the slice length {length}.")
  return x[:, :length - margin]


def _reverse_scan(step, init, xs):
  """Runs `step` from the last time step back to the first over [B, T] inputs.

  Time is moved to the leading axis because lax.scan iterates over axis 0.
  Returns the per-step outputs as [B, T].
  """
  xs_time_major = tuple(x.T for x in xs)
  _, ys = jax.lax.scan(step, init, xs_time_major, reverse=True)
  return ys.T


@dataclasses.dataclass(frozen=True)
class Estimator:
  """An advantage estimator bound to its settings: what @gae, @td_lambda, @td_k and
  @monte_carlo make, called with (gamma, margin) by the trainer.

  Calling it, estimator(rewards, returns, values, dones, mask), gives the
  [B, L - margin] advantages of [B, L] slices (module doc).

  Attributes:
    name: the gin name, for messages.
    slices: the function called, with the settings bound.
    margin: rows after each trained row that the estimate looks ahead through.
    bootstraps: it reads the values of later rows, so it needs margin >= 1.
    whole_episodes: it reads the stored Monte-Carlo returns, which are right
      only on whole episodes (rl.learner.checks.check_estimator).
    every_row: None, or the same advantages for every stored row at once (the
      one a slice starting at that row would get), without the slices:
      every_row(rewards, values, dones, mask, follows) -> [N] on [N] rows laid
      out trajectory after trajectory, follows[t] saying that row t + 1
      belongs to row t's trajectory.
    bootstrap_row: None, or for an estimator whose advantage of row t reads
      the values of at most two rows, t and one later row t + j:
      bootstrap_row(dones, mask) -> [B, L - margin] int32 offsets j in
      1..margin, 0 where no later value counts. Every other row's value is
      weighed by an exact zero, so zeros there give the same advantages bit for
      bit, and a caller need not evaluate a network on them (DQN's targets).
  """
  name: str
  slices: Callable
  margin: int
  bootstraps: bool = True
  whole_episodes: bool = False
  every_row: Optional[Callable] = None
  bootstrap_row: Optional[Callable] = None

  def __call__(self, rewards, returns, values, dones, mask):
    return self.slices(rewards, returns, values, dones, mask)


# The cores are jitted once at module level with only `margin` static, so every
# (gamma, lambda_) shares one compiled program per input shape; the factories bind
# their settings with functools.partial, or traced_values.bound where a grid may vary
# lambda_ (under an outer jax.jit the inner one is inlined).


@functools.partial(jax.jit, static_argnames=("margin",))
def _monte_carlo_core(rewards, returns, values, dones, mask, margin):
  _, returns, values, _, mask = _as_arrays(rewards, returns, values, dones, mask)
  return _trim((returns - values) * mask, margin)


@functools.partial(jax.jit, static_argnames=("margin",))
def _td_k_core(rewards, returns, values, dones, mask, gamma, margin):
  rewards, _, values, dones, mask = _as_arrays(rewards, returns, values, dones, mask)
  k = margin
  n_out = _trim(rewards, k).shape[1]

  def rows(x, j):
    # Row t + j for every output row t.
    return x[:, j:j + n_out]

  target = jnp.zeros_like(rows(rewards, 0))
  # Weight of "still inside the window": zero once the episode terminated or
  # the trajectory's final-observation row was reached.
  alive = jnp.ones_like(target)
  for j in range(k):
    if j > 0:
      cut = 1.0 - rows(mask, j)
      # Reached the final observation before k steps: bootstrap from it.
      target = target + alive * cut * gamma**j * rows(values, j)
      alive = alive * rows(mask, j)
    target = target + alive * gamma**j * rows(rewards, j)
    alive = alive * (1.0 - rows(dones, j))
  target = target + alive * gamma**k * rows(values, k)
  return (target - rows(values, 0)) * rows(mask, 0)


@functools.partial(jax.jit, static_argnames=("margin",))
def _td_k_bootstrap_row_core(dones, mask, margin):
  """The row offset whose value `_td_k_core` bootstraps each output row from.

  The same walk through the window as `_td_k_core`: the first mask-0 row
  reached while still alive (a truncation: bootstrap from the final
  observation), else row k if no termination came first, else none (0).
  """
  dones, mask = (jnp.asarray(x, jnp.float32) for x in (dones, mask))
  k = margin
  n_out = _trim(dones, k).shape[1]

  def rows(x, j):
    return x[:, j:j + n_out]

  row = jnp.zeros(rows(dones, 0).shape, jnp.int32)
  alive = jnp.ones_like(rows(dones, 0))
  for j in range(k):
    if j > 0:
      row = jnp.where(alive * (1.0 - rows(mask, j)) > 0, j, row)
      alive = alive * rows(mask, j)
    alive = alive * (1.0 - rows(dones, j))
  return jnp.where(alive > 0, k, row)


@functools.partial(jax.jit, static_argnames=("margin",))
def _no_bootstrap_row_core(dones, mask, margin):
  """No later row's value counts (Monte-Carlo returns): offsets of 0."""
  del mask
  return jnp.zeros(_trim(jnp.asarray(dones), margin).shape, jnp.int32)


@functools.partial(jax.jit, static_argnames=("margin",))
def _td_lambda_core(rewards, returns, values, dones, mask, gamma, lambda_, margin):
  rewards, _, values, dones, mask = _as_arrays(rewards, returns, values, dones, mask)

  def step(next_return, x):
    reward, done, next_value, next_mask = x
    # Past the final observation (next_mask == 0) there is no G_{t+1} to
    # blend in, so the target falls back to the plain bootstrap V_{t+1}.
    mix = lambda_ * next_mask
    blended = (1.0 - mix) * next_value + mix * next_return
    g = reward + gamma * (1.0 - done) * blended
    return g, g

  xs = (rewards[:, :-1], dones[:, :-1], values[:, 1:], mask[:, 1:])
  g_head = _reverse_scan(step, values[:, -1], xs)
  g = jnp.concatenate([g_head, values[:, -1:]], axis=1)
  return _trim((g - values) * mask, margin)


@functools.partial(jax.jit, static_argnames=("margin",))
def _gae_core(rewards, returns, values, dones, mask, gamma, lambda_, margin):
  rewards, _, values, dones, mask = _as_arrays(rewards, returns, values, dones, mask)

  def step(next_advantage, x):
    delta, done, next_mask = x
    a = delta + gamma * lambda_ * (1.0 - done) * next_mask * next_advantage
    return a, a

  not_done = 1.0 - dones[:, :-1]
  deltas = rewards[:, :-1] + gamma * not_done * values[:, 1:] - values[:, :-1]
  init = jnp.zeros_like(values[:, -1])
  a_head = _reverse_scan(step, init, (deltas, dones[:, :-1], mask[:, 1:]))
  a = jnp.concatenate([a_head, jnp.zeros_like(values[:, -1:])], axis=1)
  return _trim(a * mask, margin)


def _shifted(x, k):
  """x[t + k] at every t, zeros past the end."""
  return jnp.concatenate([x[k:], jnp.zeros((k,) + x.shape[1:], x.dtype)])


@functools.partial(jax.jit, static_argnames=("margin",))
def _gae_every_row_core(rewards, values, dones, mask, follows, gamma, lambda_, margin):
  """Every row's GAE over the `margin` steps that start at it (`Estimator.every_row`).

  The advantage of row t is sum_k (prod_{j<k} c[t + j]) delta[t + k] over
  k < margin, with the TD residuals delta and the coefficients c = gamma *
  lambda * (1 - done) * (mask of the next row) that `_gae_core`'s backward
  scan uses on a slice of margin + 1 rows starting at t. Rather than a scan
  per row (margin steps over every row), windows of 1, 2, 4, ... rows are
  merged pairwise, the sums and coefficient products of the halves combined
  as (s1 + p1 * s2, p1 * p2), and the binary digits of `margin` pick the
  windows that make up each row's: log2(margin) vectorised rounds. A window
  never reaches past its trajectory's end: there the next row's mask, hence
  the product, is zero.
  """
  # As one [1, N] slice for _as_arrays' checks and dtypes.
  rewards, _, values, dones, mask = (x[0] for x in _as_arrays(
      *(jnp.asarray(x)[None] for x in (rewards, rewards, values, dones, mask))))
  follows = jnp.asarray(follows, bool)
  next_value = jnp.where(follows, _shifted(values, 1), 0.0)
  next_mask = jnp.where(follows, _shifted(mask, 1), 0.0)
  not_done = 1.0 - dones
  deltas = rewards + gamma * not_done * next_value - values
  coeffs = gamma * lambda_ * not_done * next_mask
  total, product, covered = jnp.zeros_like(deltas), jnp.ones_like(deltas), 0
  span_sum, span_product, span = deltas, coeffs, 1
  remaining = margin
  while remaining:
    if remaining & 1:
      total = total + product * _shifted(span_sum, covered)
      product = product * _shifted(span_product, covered)
      covered += span
    remaining >>= 1
    if remaining:
      span_sum = span_sum + span_product * _shifted(span_sum, span)
      span_product = span_product * _shifted(span_product, span)
      span *= 2
  return total * mask


# What the trainers pass every estimator themselves (a binding of it is refused: rl.overridden).
_SET_BY_TRAINER = {'gamma': 'RLTask.gamma', 'margin': "the trainer's added_policy_slice_length"}


@configurable("monte_carlo", set_by_caller=_SET_BY_TRAINER)
def monte_carlo(gamma, margin):
  """A_t = G_t - V_t with the stored (non-bootstrapped) returns.

  Args:
    gamma: unused: the stored returns are discounted with RLTask.gamma
      already (passed by the trainer).
    margin: rows after the trained ones that the estimates look ahead through (passed by
      the trainer: its added_policy_slice_length, or DQN's max_slice_length - 1).
  """
  del gamma  # The returns were already discounted when they were stored.
  margin = _check_margin(margin)
  return Estimator('monte_carlo', functools.partial(_monte_carlo_core, margin=margin), margin,
                   bootstraps=False, whole_episodes=True,
                   bootstrap_row=functools.partial(_no_bootstrap_row_core, margin=margin))


@configurable("td_k", set_by_caller=_SET_BY_TRAINER)
def td_k(gamma, margin):
  """k-step TD advantage with k = margin (cut short by termination or a mask-0 row).

  Args:
    gamma: the discount factor (passed by the trainer: RLTask.gamma; bind that instead).
    margin: rows after the trained ones that the estimates look ahead through (passed by
      the trainer: its added_policy_slice_length, or DQN's max_slice_length - 1).
  """
  margin = _check_margin(margin)
  return Estimator('td_k', functools.partial(_td_k_core, gamma=gamma, margin=margin), margin,
                   bootstrap_row=functools.partial(_td_k_bootstrap_row_core, margin=margin))


@configurable("td_lambda", set_by_caller=_SET_BY_TRAINER)
def td_lambda(gamma, margin, lambda_=0.95):
  """TD(lambda) advantage: lambda-returns G_t minus V_t, with G_{L-1} = V_{L-1}.

  Args:
    gamma: the discount factor (passed by the trainer: RLTask.gamma; bind that instead).
    margin: rows after the trained ones that the estimates look ahead through (passed by
      the trainer: its added_policy_slice_length, or DQN's max_slice_length - 1).
    lambda_: weight of the longer look-ahead, in [0, 1]: 0 gives one-step
      TD errors, 1 Monte-Carlo returns bootstrapped at the margin.
  """
  ranges.in_range('td_lambda.lambda_', lambda_, low=0, high=1)
  margin = _check_margin(margin)
  return Estimator('td_lambda', traced_values.bound(
      _td_lambda_core, 'td_lambda', 'lambda_', lambda_, gamma=gamma, margin=margin), margin)


@configurable("gae", set_by_caller=_SET_BY_TRAINER)
def gae(gamma, margin, lambda_=0.95):
  """Generalised advantage estimation; equals td_lambda with the same lambda_.

  Args:
    gamma: the discount factor (passed by the trainer: RLTask.gamma; bind that instead).
    margin: rows after the trained ones that the estimates look ahead through (passed by
      the trainer: its added_policy_slice_length, or DQN's max_slice_length - 1).
    lambda_: weight of the longer look-ahead, in [0, 1]: 0 gives one-step
      TD errors, 1 Monte-Carlo returns bootstrapped at the margin.
  """
  ranges.in_range('gae.lambda_', lambda_, low=0, high=1)
  margin = _check_margin(margin)
  settings = dict(gamma=gamma, margin=margin)
  return Estimator('gae', traced_values.bound(_gae_core, 'gae', 'lambda_', lambda_, **settings),
                   margin, every_row=traced_values.bound(_gae_every_row_core, 'gae', 'lambda_',
                                                         lambda_, **settings))


@jax.jit
def normalize(x, mask, epsilon=1e-8):
  """(x - mean) / (std + epsilon) with statistics over mask == 1 entries only.

  Padding must not shift the statistics, hence the masked mean and
  (population) std; the result is zero where mask is zero. With no real
  entries at all the result is all zeros rather than NaN.
  """
  x = jnp.asarray(x)
  x = x.astype(jnp.promote_types(x.dtype, jnp.float32))
  mask = jnp.asarray(mask, dtype=x.dtype)
  # Padding may hold anything (even inf or NaN); `where`, unlike a product
  # with the mask, keeps it out of the statistics and the result.
  x = jnp.where(mask > 0, x, 0.0)
  count = jnp.maximum(jnp.sum(mask), 1.0)
  mean = jnp.sum(x * mask) / count
  var = jnp.sum(mask * jnp.square(x - mean)) / count
  return (x - mean) / (jnp.sqrt(var) + epsilon) * mask


def normalize_advantages(advantages, mask, epsilon=1e-5, factor=1.0):
  """factor * (A - mean) / (std + epsilon) over the real steps of the batch."""
  return factor * normalize(advantages, mask, epsilon)


def masked_mean(x, mask):
  """Mean of x over the real steps (mask 1); 0 for an all-padding batch.

  `where` rather than a product, so padding holding inf or NaN stays out.
  """
  return jnp.sum(jnp.where(mask > 0, x * mask, 0.0)) / jnp.maximum(jnp.sum(mask), 1.0)


def masked_means(mask, **xs):
  """{name: masked_mean(x, mask)} for every x (shaped like mask), in one reduction.

  The metrics a loss reports at every gradient step, stacked and summed in one
  kernel rather than one each (a few percent of CartPole PPO's step). The sums
  may round differently from `masked_mean`'s in the last bit, so the losses
  themselves keep `masked_mean`.
  """
  if not xs:
    return {}
  stacked = jnp.stack([jnp.broadcast_to(x, jnp.shape(mask)) for x in xs.values()])
  sums = jnp.sum(jnp.where(mask > 0, stacked * mask, 0.0), axis=tuple(range(1, stacked.ndim)))
  means = sums / jnp.maximum(jnp.sum(mask), 1.0)
  return {name: means[i] for i, name in enumerate(xs)}
