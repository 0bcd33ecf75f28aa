"""Gin-configurable optimizers, built from optax transformations.

Each builder returns an ``optax.GradientTransformation`` whose updates are
meant to be *added* to the parameters (``optax.apply_updates``). All of them
take a ``learning_rate`` that is either a float or an optax schedule
``step -> lr``; a schedule is evaluated at the optimizer's own 0-based update
count, so the first update uses ``learning_rate(0)``. Trainers pass the
schedule built by ``rl.optim.lr_schedules.multifactor`` here, which is
how the reference's "the schedule overwrites the learning rate every step"
behaviour is expressed with optax.

The builders are registered with gin under their reference names, so configs
write e.g. ``PolicyGradientTrainer.optimizer = @Adam`` and
``Adam.clip_grad_norm = 0.5``.
"""

import optax

from rl import ranges
from rl.configurables import configurable
from rl.errors import ConfigError


def _schedules(operative):
  """What sets an optimizer's learning rate: the run's lr schedule bindings, in words.

  `operative`: the run's operative bindings ({'PPO.policy_lr_schedule':
  '@policy/multifactor', ...}); an unset schedule is the plain @multifactor.
  """
  bound = {k: v for k, v in operative.items() if k.endswith('lr_schedule')}
  names = [v[1:] if v.startswith('@') else 'multifactor' for v in bound.values()] or [
      'multifactor']
  listed = f" ({', '.join(f'{k} = {v}' for k, v in bound.items())})" if bound else ''
  return f'the learning-rate schedule{listed}, e.g. {names[0]}.constant'


# The trainers build every optimizer with their schedule: optimizer(learning_rate=schedule).
_SET_BY_TRAINER = {'learning_rate': _schedules}


def _check_rate(name, learning_rate):
  """A learning rate given as a number (not a schedule) must be positive."""
  ranges.in_range(f'{name}.learning_rate', learning_rate, low=0, low_open=True)


@configurable(set_by_caller=_SET_BY_TRAINER)
def Adam(  # pylint: disable=invalid-name  # the name configs refer to
    learning_rate=1e-4,
    weight_decay_rate=1e-5,
    b1=0.9,
    b2=0.999,
    eps=1e-5,
    clip_grad_norm=None,
):
  """Adam with decoupled, multiplicative weight decay.

  One update is ``w <- (1 - weight_decay_rate) * w - lr * m_hat /
  (sqrt(v_hat) + eps)`` with bias-corrected moments ``m_hat``, ``v_hat``. The
  decay is *not* multiplied by the learning rate, unlike ``optax.adamw``
  (which decays by ``lr * weight_decay``), so a warmup schedule does not also
  warm up the decay.

  Args:
    learning_rate: float or schedule ``step -> lr``; the trainers pass their
      lr_schedule (set the rate there, e.g. ``multifactor.constant``).
    weight_decay_rate: fraction of every weight removed at each update,
      independently of the learning rate. 0 disables the decay, and then
      ``update`` does not need ``params``.
    b1: decay rate of the first-moment (gradient) average.
    b2: decay rate of the second-moment (squared-gradient) average.
    eps: added to ``sqrt(v_hat)`` (outside the square root) to keep the
      denominator away from 0. The default 1e-5 is the reference's, larger
      than optax's 1e-8.
    clip_grad_norm: if set, gradients whose global L2 norm is >= this value
      are rescaled to have exactly this norm, before anything else.

  Returns:
    An ``optax.GradientTransformation``; ``update`` needs ``params`` unless
    ``weight_decay_rate`` is 0.
  """
  _check_rate('Adam', learning_rate)
  ranges.in_range('Adam.weight_decay_rate', weight_decay_rate, low=0, high=1, high_open=True)
  ranges.in_range('Adam.b1', b1, low=0, high=1, high_open=True)
  ranges.in_range('Adam.b2', b2, low=0, high=1, high_open=True)
  ranges.in_range('Adam.eps', eps, low=0)
  steps = [
      *_clipping(clip_grad_norm),
      optax.scale_by_adam(b1=b1, b2=b2, eps=eps),
      # Scale by +lr (no sign flip yet) so the decay term added next stays
      # outside the learning rate; one sign flip at the end turns
      # `lr * adam + wd * w` into the descent step `-lr * adam - wd * w`.
      optax.scale_by_learning_rate(learning_rate, flip_sign=False),
  ]
  if weight_decay_rate:
    # Skipped at 0 because add_decayed_weights demands params even then.
    steps.append(optax.add_decayed_weights(weight_decay_rate))
  steps.append(optax.scale(-1.0))
  return optax.chain(*steps)


@configurable(set_by_caller=_SET_BY_TRAINER)
def RMSProp(  # pylint: disable=invalid-name  # the name configs refer to
    learning_rate=1e-3,
    gamma=0.9,
    eps=1e-8,
    clip_grad_norm=None,
):
  """RMSProp as in the reference: ``w <- w - lr * g / (sqrt(avg) + eps)``.

  ``avg <- gamma * avg + (1 - gamma) * g**2`` starts from ones (not zeros as
  in ``optax.rmsprop``'s default), so the first steps are not inflated by a
  nearly-empty average; and ``eps`` is added outside the square root.

  Args:
    learning_rate: float or schedule ``step -> lr``; the trainers pass their
      lr_schedule (set the rate there, e.g. ``multifactor.constant``).
    gamma: decay rate of the running average of squared gradients.
    eps: added to ``sqrt(avg)`` to keep the denominator away from 0.
    clip_grad_norm: if set, gradients whose global L2 norm is >= this value
      are rescaled to have exactly this norm, before anything else.

  Returns:
    An ``optax.GradientTransformation``.
  """
  _check_rate('RMSProp', learning_rate)
  ranges.in_range('RMSProp.gamma', gamma, low=0, high=1)
  ranges.in_range('RMSProp.eps', eps, low=0)
  return optax.chain(
      *_clipping(clip_grad_norm),
      optax.scale_by_rms(
          decay=gamma, eps=eps, initial_scale=1.0, eps_in_sqrt=False),
      optax.scale_by_learning_rate(learning_rate),
  )


@configurable(set_by_caller=_SET_BY_TRAINER)
def SGD(  # pylint: disable=invalid-name  # the name configs refer to
    learning_rate=1e-2,
    momentum=0.0,
    nesterov=False,
    clip_grad_norm=None,
):
  """Stochastic gradient descent, optionally with (Nesterov) momentum.

  Without momentum ``w <- w - lr * g``. With momentum ``v <- momentum * v +
  g`` (v starts at 0) and ``w <- w - lr * v``, or ``w <- w - lr * (g +
  momentum * v)`` with ``nesterov``.

  Args:
    learning_rate: float or schedule ``step -> lr``; the trainers pass their
      lr_schedule (set the rate there, e.g. ``multifactor.constant``).
    momentum: decay of the velocity; 0 means plain SGD (and no optimizer
      state is kept for a velocity).
    nesterov: use Nesterov momentum; has no effect when ``momentum`` is 0.
    clip_grad_norm: if set, gradients whose global L2 norm is >= this value
      are rescaled to have exactly this norm, before anything else.

  Returns:
    An ``optax.GradientTransformation``.
  """
  _check_rate('SGD', learning_rate)
  ranges.in_range('SGD.momentum', momentum, low=0, high=1)
  return optax.chain(
      *_clipping(clip_grad_norm),
      optax.sgd(
          learning_rate, momentum=momentum or None, nesterov=nesterov),
  )


def _clipping(clip_grad_norm):
  """Returns the (possibly empty) list of clipping transforms to chain first."""
  if clip_grad_norm is None:
    return []
  if clip_grad_norm <= 0:
    # A zero norm would zero every gradient (and 0/0 for zero gradients);
    # reject it loudly instead of training silently on nothing.
    raise ConfigError(
        f'clip_grad_norm must be positive or None, got {clip_grad_norm!r}.')
  return [optax.clip_by_global_norm(clip_grad_norm)]
