"""The ranges a parameter's value must lie in for the maths to hold, checked where it is stored.

A discount above 1 makes returns grow without bound, a negative clip range
turns PPO's clipping inside out, a schedule's period of 0 divides by zero:
none of them fails where it is bound, so each constructor declares the range
of its parameters with `in_range` next to where it stores them, e.g.

    ranges.in_range('PPO.epsilon', epsilon, low=0, low_open=True)

and a value outside it stops the run before anything is written, in one
line that names the binding, the value, the range and a value to bind.
"""
import numbers

import gin

from rl import configurables
from rl.errors import ConfigError


def in_range(binding, value, low=None, high=None, low_open=False, high_open=False, why=''):
  """Refuses `value` of `binding` ('Selector.param') outside [low, high] with one ConfigError.

  Args:
    binding: the gin binding the value comes from, as the message names it;
      the gin scope of the call in progress is put before it
      (policy/multifactor.constant for @policy/multifactor).
    value: the value; None (a parameter's "unset") and non-numbers pass (the
      type checks are rl.configurables').
    low, high: the ends of the range; None: unbounded on that side.
    low_open, high_open: whether that end itself is outside the range.
    why: what goes wrong outside the range, a few words for the message.
  """
  if not _is_number(value) or _inside(value, low, high, low_open, high_open):
    return
  scope = gin.current_scope_str()
  binding = f'{scope}/{binding}' if scope and '/' not in binding else binding
  allowed = range_text(low, high, low_open, high_open)
  example = _default(binding)
  if not _inside(example, low, high, low_open, high_open):
    # A parameter whose default is None (set from others): its range's closed end.
    example = low if low is not None and not low_open else None
  raise ConfigError(f'{binding} = {value!r} is out of range: it must be {allowed}'
                    + (f' ({why})' if why else '')
                    + f'; bind a value {allowed}' + (f', e.g. {binding} = {example!r}.'
                                                      if example is not None else '.'))


def range_text(low, high, low_open=False, high_open=False):
  """'in [0, 1]', 'in (0, 1]', '> 0', '>= 1': the range in the words of a message."""
  if low is not None and high is not None:
    return f"in {'(' if low_open else '['}{low}, {high}{')' if high_open else ']'}"
  if low is not None:
    return f"{'>' if low_open else '>='} {low}"
  return f"{'<' if high_open else '<='} {high}"


def _is_number(value):
  return isinstance(value, numbers.Real) and not isinstance(value, bool)


def _inside(value, low, high, low_open, high_open):
  """Whether the number `value` is in the range (NaN never is); False for a non-number."""
  return _is_number(value) and (
      (low is None or (value > low if low_open else value >= low))
      and (high is None or (value < high if high_open else value <= high)))


def _default(binding):
  """The default of the parameter `binding` names (a value to suggest), else None."""
  fn = configurables.find(binding.rpartition('.')[0])
  return None if fn is None else configurables.parameter_default(fn, binding.rpartition('.')[2])
