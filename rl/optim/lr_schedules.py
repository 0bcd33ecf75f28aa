"""Learning-rate (and exploration-rate) schedules.

A schedule here is what optax calls a ``Schedule``: a callable ``step ->
scalar``. RL agents are handed a schedule *factory* (``multifactor``) and call
it with no arguments, so every setting comes from gin; gin scopes such as
``policy/multifactor`` or ``exploration_rate/multifactor`` give different
settings to different users of the same factory.
"""

import math
from typing import Callable

import gin
import jax.numpy as jnp
import optax

from rl import ranges
from rl import traced_values
from rl.configurables import configurable
from rl.errors import ConfigError

# Kept in the order the reference documents them, so the error message for an
# unknown factor lists them in a familiar order.
VALID_FACTORS = (
    'constant',
    'two_constants',
    'linear_warmup',
    'rsqrt_decay',
    'rsqrt_normalized_decay',
    'decay_every',
    'cosine_decay',
)


@configurable
def multifactor(
    factors='constant * linear_warmup * rsqrt_decay',
    constant=0.1,
    warmup_steps=400,
    decay_factor=0.5,
    steps_per_decay=20000,
    steps_per_cycle=100000,
    second_constant=0.01,
    second_constant_step=10000,
    minimum=0.0,
):
  """Builds a schedule that is the product of several named factors.

  The returned callable maps a step (a Python int or an integer JAX array,
  traced or not) to a ``jnp.float32`` scalar, so it can be passed directly as
  an optax ``learning_rate``. The trainer evaluates it at its 0-based step;
  with ``linear_warmup`` the very first update therefore has rate 0.

  Args:
    factors: '*'-separated factor names (surrounding whitespace is ignored).
      The schedule is the product of the factors, each of which is one of:
      ``constant``: multiplies by ``constant``;
      ``two_constants``: multiplies by ``constant`` while
        ``step < second_constant_step`` and by ``second_constant`` from then
        on (so ``constant * two_constants`` applies ``constant`` twice early
        on, exactly as the reference does);
      ``linear_warmup``: ``min(1, step / warmup_steps)``;
      ``rsqrt_decay``: ``1 / sqrt(max(step, warmup_steps))``;
      ``rsqrt_normalized_decay``:
        ``sqrt(warmup_steps) / sqrt(max(step, warmup_steps))``;
      ``decay_every``: ``decay_factor ** (step // steps_per_decay)``;
      ``cosine_decay``: ``0.5 * (1 + cos(pi * frac(p)))`` with
        ``p = max(0, (step - warmup_steps) / steps_per_cycle)``, i.e. a cosine
        from 1 to 0 that restarts every ``steps_per_cycle`` steps after
        warmup.
    constant: multiplier used by ``constant`` and, before
      ``second_constant_step``, by ``two_constants``.
    warmup_steps: length of the linear warmup; also the floor of the step used
      by the rsqrt decays and the start of ``cosine_decay``. A value <= 0
      makes ``linear_warmup`` a factor of 1 (warming up over no steps is
      already done), rather than the 0/0 the plain formula would give.
    decay_factor: per-period multiplier of ``decay_every``.
    steps_per_decay: period, in steps, of ``decay_every``.
    steps_per_cycle: period, in steps, of ``cosine_decay``.
    second_constant: multiplier used by ``two_constants`` from
      ``second_constant_step`` onwards.
    second_constant_step: the step at which ``two_constants`` switches.
    minimum: lower bound of the result: if the product is <= ``minimum`` the
      schedule returns ``minimum`` (used e.g. to keep an epsilon-greedy
      exploration rate from decaying to 0).

  Returns:
    A callable ``step -> jnp.float32`` scalar.

  Raises:
    ValueError: if ``factors`` names a factor not in ``VALID_FACTORS``. This is
      raised here, at construction, so a typo in a gin file fails when the
      agent is built instead of at its first training step.
  """
  # Rates are not negative; the periods divide the step.
  for param, value in (('constant', constant), ('second_constant', second_constant),
                       ('minimum', minimum)):
    ranges.in_range(f'multifactor.{param}', value, low=0)
  ranges.in_range('multifactor.decay_factor', decay_factor, low=0, low_open=True)
  ranges.in_range('multifactor.steps_per_decay', steps_per_decay, low=1)
  ranges.in_range('multifactor.steps_per_cycle', steps_per_cycle, low=1)
  names = [name.strip() for name in factors.split('*')]
  for name in names:
    if name not in VALID_FACTORS:
      raise ConfigError(
          f'Unknown factor {name!r} in multifactor factors {factors!r}; '
          f'valid factors are: {", ".join(VALID_FACTORS)}. Fix the '
          'multifactor.factors binding in the gin config.'
      )

  # Factors are resolved to callables once, here, so the returned schedule is
  # a plain chain of jnp operations that jit traces without any string work.
  # `constant` is read when the schedule is traced: a grid may vary it
  # (rl.traced_values), under the scope this schedule is built in.
  scope = gin.current_scope_str()

  def constant_value():
    return traced_values.value('multifactor', 'constant', constant, scope)

  factor_fns = [
      _make_factor(
          name,
          constant=constant_value,
          warmup_steps=warmup_steps,
          decay_factor=decay_factor,
          steps_per_decay=steps_per_decay,
          steps_per_cycle=steps_per_cycle,
          second_constant=second_constant,
          second_constant_step=second_constant_step,
      )
      for name in names
  ]

  def schedule(step):
    value = jnp.float32(1.0)
    for factor_fn in factor_fns:
      value = value * factor_fn(step)
    # `max` equals the reference's "if value <= minimum: return minimum" for
    # every non-NaN value, and NaN still propagates, as it does there. The
    # final cast pins the dtype even when x64 is enabled.
    return jnp.maximum(value, minimum).astype(jnp.float32)

  return schedule


def _make_factor(
    name,
    *,
    constant,
    warmup_steps,
    decay_factor,
    steps_per_decay,
    steps_per_cycle,
    second_constant,
    second_constant_step,
) -> Callable:
  """Returns the ``step -> scalar`` function of one (validated) factor name; ``constant()``
  gives the constant, read when the schedule is called."""
  if name == 'constant':
    return lambda step: optax.constant_schedule(constant())(step)

  if name == 'two_constants':
    # join_schedules switches to the second schedule once
    # `step >= boundary`, which is exactly the reference's
    # `constant if step < second_constant_step else second_constant`.
    return lambda step: optax.join_schedules(
        [
            optax.constant_schedule(constant()),
            optax.constant_schedule(second_constant),
        ],
        [second_constant_step],
    )(step)

  if name == 'linear_warmup':
    # Not optax.linear_schedule: it computes the ramp as 1 - (1 - t/T), which
    # is not bit-identical to t/T in float32, and it returns its *start* value
    # (0) forever when the transition has no steps.
    if warmup_steps <= 0:
      return lambda step: jnp.float32(1.0)
    return lambda step: jnp.minimum(1.0, _as_float(step) / warmup_steps)

  if name == 'rsqrt_decay':
    return lambda step: jnp.reciprocal(
        jnp.sqrt(jnp.maximum(_as_float(step), warmup_steps)))

  if name == 'rsqrt_normalized_decay':
    sqrt_warmup = math.sqrt(max(warmup_steps, 0))
    return lambda step: sqrt_warmup / jnp.sqrt(
        jnp.maximum(_as_float(step), warmup_steps))

  if name == 'decay_every':
    # Not optax.exponential_decay(staircase=True): it floors the float32
    # quotient step / steps_per_decay, which can round up to the next integer
    # just before a period boundary once steps are large. Integer floor
    # division on the step itself is exact.
    def decay_every(step):
      n_decays = jnp.floor_divide(jnp.asarray(step), steps_per_decay)
      return jnp.power(jnp.float32(decay_factor), _as_float(n_decays))
    return decay_every

  if name == 'cosine_decay':
    # optax's cosine schedules do not restart every cycle; this one does.
    def cosine_decay(step):
      progress = jnp.maximum(
          0.0, (_as_float(step) - warmup_steps) / steps_per_cycle)
      return 0.5 * (1.0 + jnp.cos(jnp.pi * (progress % 1.0)))
    return cosine_decay

  # multifactor validates names before calling this; reaching here is a bug.
  raise AssertionError(f'unhandled factor {name!r}')


def _as_float(step):
  """Casts a step to float32 so integer steps divide as real numbers."""
  return jnp.asarray(step, dtype=jnp.float32)
