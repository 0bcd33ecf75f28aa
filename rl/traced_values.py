"""Float hyperparameters that the members of a grid vary inside one compiled program.

Every setting of a run is a Python constant of its compiled epoch. A grid
(`rl.run --grid`, rl.grid) trains runs that differ only in some float
hyperparameters as one program vmapped over its members, so those values must
be inputs of the program instead: where the epoch reads one, it reads it
through `value`, which gives the constant in a single run and, while a grid's
program is traced (`tracing`), the member's value as a traced scalar. Nothing
else changes: a member computes what the single run with its bindings
computes, up to float rounding (docs/grids.md).

The parameters read this way are rl.grid.TRACEABLE; a test checks that each
one is read by the epochs of the algorithms that have it.
"""
import contextlib
import contextvars

import gin

from rl.errors import ConfigError

# While a grid's program is traced: (binding name -> the member's traced value,
# binding name -> the lead member's value, the names read so far).
_TRACING = contextvars.ContextVar('traced_values', default=None)


def value(configurable, parameter, constant, scope=''):
  """`constant`, or the traced value of `configurable.parameter` while a grid that varies it
  is traced.

  configurable: the gin name of what holds the parameter ('PPO', 'multifactor');
  scope: the gin scope it was built in ('policy' for @policy/multifactor). A
  scoped grid binding ('policy/multifactor.constant') is looked up first, then
  the unscoped one.
  """
  tracing = _TRACING.get()
  if tracing is None:
    return constant
  traced, lead, read = tracing
  names = ([f'{scope}/{configurable}.{parameter}'] if scope else []) + [
      f'{configurable}.{parameter}']
  for name in names:
    if name in traced:
      if float(constant) != float(lead[name]):
        # gin gave this use another binding (a scoped one over an unscoped grid
        # binding): the grid's values would not be the ones it reads.
        raise ConfigError(
            f'--grid {name}: the run reads {constant!r} there, not the grid\'s '
            f'{lead[name]!r} (another binding of it wins, such as a scoped one); grid the '
            'binding the config uses.')
      read.add(name)
      return traced[name]
  return constant


def bound(function, configurable, parameter, constant, **settings):
  """`function` with `settings` bound and `parameter` read through `value` when it is called,
  under the gin scope of now (while `configurable` is being built)."""
  scope = gin.current_scope_str()

  def call(*args):
    return function(*args, **settings,
                    **{parameter: value(configurable, parameter, constant, scope)})
  return call


@contextlib.contextmanager
def tracing(traced, lead):
  """Traces a grid's program: `value` gives the traced values `traced` ({binding name: traced
  scalar}); `lead` holds the first member's values, which its own objects hold as constants.

  Raises ConfigError when the traced code read some of them nowhere: their
  values would not reach the program.
  """
  read = set()
  token = _TRACING.set((traced, lead, read))
  try:
    yield
  finally:
    _TRACING.reset(token)
  unread = sorted(set(traced) - read)
  if unread:
    raise ConfigError(
        f"--grid {', '.join(unread)}: this run's compiled epoch does not read "
        f"{'it' if len(unread) == 1 else 'them'} (a parameter of a configurable the run "
        'does not use?); grid parameters the run uses.')
