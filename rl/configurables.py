"""What the package's gin configurables are called and accept, and the type check of numbers.

The friendly errors of rl.config suggest names from here ("did you mean"),
and `check_numeric_bindings` refuses a value of the wrong type for a numeric
parameter before anything runs. Everything goes through gin's public API
(gin.get_configurable, gin.config_str, gin.query_parameter); gin lists no
registered names, so the package registers through `configurable`, which
records them.
"""
import inspect
import math
import re

import gin

from rl.errors import ConfigError

# Integer parameters whose default is None (their other integer parameters
# are recognised by their integer defaults).
_INTEGER_PARAMETERS_WITHOUT_DEFAULT = frozenset((
    'n_trajectories_per_epoch', 'n_interactions_per_epoch', 'collect_per_epoch',
    'max_steps', 'time_limit', 'n_eval_episodes', 'eval_every'))
# The names registered through `configurable`, in the order their modules were imported.
_NAMES = []
# {(configurable name, parameter): what sets it}: parameters that the code calling the
# configurable passes itself, so a binding of one has no effect (`set_by_caller`).
_SET_BY_CALLER = {}


def find(selector):
  """The function or class gin calls for `selector` (scope ignored); None if gin has none."""
  try:
    return gin.get_configurable(selector.split('/')[-1])
  except (ValueError, KeyError):  # unknown, or a name that matches several
    return None


def configurable(name_or_fn=None, set_by_caller=None, **kwargs):
  """gin.configurable that also records the name it registers (see `registered_names`).

  Used as @configurable, @configurable('name') or @configurable(denylist=[...]),
  exactly as gin.configurable. set_by_caller: {parameter: what sets it} for
  parameters that the package's code always passes itself (an optimizer's
  learning rate, from the schedule); a binding of one is refused, naming what
  to bind instead (rl.overridden). What sets it is a line such as 'RLTask.gamma',
  or a function of the run's operative bindings that returns one.
  """
  if callable(name_or_fn):
    _NAMES.append(name_or_fn.__name__)
    return gin.configurable(name_or_fn, **kwargs)

  def decorate(fn):
    name = name_or_fn or fn.__name__
    _NAMES.append(name)
    for param, setter in (set_by_caller or {}).items():
      _SET_BY_CALLER[name, param] = setter
    return gin.configurable(name_or_fn, **kwargs)(fn)
  return decorate


def setter_of(selector, param):
  """What sets parameter `param` of configurable `selector` (scope ignored), as declared to
  `configurable`; None when the package's code leaves it to the config."""
  return _SET_BY_CALLER.get((selector.split('/')[-1], param))


def registered_names():
  """The names of the configurables that this package's imported modules register with gin.

  gin has no public listing of its registry, so the package registers
  through `configurable`, which records each name; only names that gin
  resolves are kept.
  """
  return sorted(name for name in set(_NAMES) if find(name) is not None)


def _signatures(fn):
  """(declaring class or function, its signature's parameters) of a configurable, nearest first.

  Up the MRO for a class: trainers pass most parameters on through **kwargs,
  so a class's own signature does not list them; its bases' signatures do.
  """
  targets = fn.__mro__ if isinstance(fn, type) else [fn]
  for target in targets:
    init = target.__init__ if isinstance(target, type) else target
    try:
      yield target, inspect.signature(init).parameters
    except (TypeError, ValueError):
      continue


def declarations(fn):
  """The inspect.Parameter of each keyword parameter of configurable `fn`.

  In declaration order, the nearest class first; a parameter that a subclass
  declares again comes from the subclass, and one that a subclass sets for
  its base itself is left out, as are `self`, *args and **kwargs.
  """
  seen = set()
  for target, params in _signatures(fn):
    for name, param in params.items():
      if name in seen or name == 'self' or param.kind in (param.VAR_KEYWORD,
                                                          param.VAR_POSITIONAL):
        continue
      seen.add(name)
      yield param
    if isinstance(target, type):
      # Parameters of its bases that the class sets itself, so a config cannot.
      seen.update(vars(target).get('fixed_parameters', ()))


def parameters_of(selector):
  """All keyword parameters a configurable accepts (following **kwargs up the MRO)."""
  fn = find(selector)
  if fn is None:
    return []
  return sorted(param.name for param in declarations(fn))


def parameter_default(fn, name):
  """The default of parameter `name` of a configurable (following **kwargs up the MRO)."""
  for param in declarations(fn):
    if param.name == name:
      return param.default
  return inspect.Parameter.empty


def _numeric_kind(name, default):
  """'an integer', 'a number' or None: what a parameter takes, judged by its default."""
  if type(default) is int or (  # pylint: disable=unidiomatic-typecheck
      default is None and name in _INTEGER_PARAMETERS_WITHOUT_DEFAULT):
    return 'an integer'
  if type(default) is float:  # pylint: disable=unidiomatic-typecheck
    return 'a number'
  return None


def _example_number(text, default, kind):
  """A number of `kind` to show for a wrong value: `text`'s own if it is one, else the default."""
  def fits(number):
    allowed = (int,) if kind == 'an integer' else (int, float)
    return isinstance(number, allowed) and not isinstance(number, bool) and math.isfinite(number)
  number = None
  for parse in (int, float):
    try:
      number = parse(text.strip())
      break
    except (ValueError, OverflowError):
      continue
  if fits(number):
    return number
  # 0 is a poor example for most counts (n_envs, batch sizes): 1 instead.
  return default if fits(default) and default else 1


def _bound_keys():
  """The 'scope/selector.param' of every binding of the parsed config, macros left out.

  gin.config_str writes a binding a line from its first column (a value's
  continuation lines are indented).
  """
  for line in gin.config_str().splitlines():
    m = re.match(r'([\w./-]+)\s*=', line)
    if m and '.' in m.group(1).split('/')[-1]:
      yield m.group(1)


def check_numeric_bindings():
  """Refuses a value of the wrong type bound to a numeric parameter (epochs, sizes, rates).

  Python would take `n_epochs = 2.5` as 2 (range() refuses it, int() floors
  it), `n_envs = True` as 1, and `n_epochs = '3'` as whatever the code does
  with a string (float() converts it, arithmetic fails far from the config),
  so such a run would quietly differ from the config or fail late. A
  parameter is an integer one when its default is an int (not a bool), or it
  is one of the step and trajectory counts that default to None; a number
  one when its default is a float. A number bound to a parameter whose default
  is a tuple (MLP.layer_widths) is refused too: it would fail deep inside the
  build, where gin's error names the configurable but not the binding.
  """
  for binding in _bound_keys():
    selector, _, name = binding.rpartition('.')
    fn = find(selector)
    if fn is None:
      continue
    value = gin.query_parameter(binding)
    default = parameter_default(fn, name)
    if isinstance(default, (tuple, list)) and isinstance(value, (int, float)):
      raise ConfigError(f'{binding} takes a tuple, got {value!r} (a single number). '
                        f'Did you mean {binding} = ({value!r},)?')
    if not isinstance(value, (bool, float, str)):
      continue
    kind = _numeric_kind(name, default)
    if kind is None or (kind == 'a number' and isinstance(value, float)):
      continue
    if isinstance(value, str):
      raise ConfigError(f'{binding} must be {kind}, got {value!r} (a string); bind it '
                        f'without quotes, e.g. {binding} = '
                        f'{_example_number(value, default, kind)}.')
    if isinstance(value, bool):
      raise ConfigError(f'{binding} must be {kind}, got {value} (a bool); bind a '
                        f"{'whole number' if kind == 'an integer' else 'number'}, e.g. "
                        f'{binding} = {_example_number("", default, kind)}.')
    if math.isfinite(value):
      example = int(value) if value == int(value) else max(int(value), 1)
    else:
      example = _example_number('', default, kind)
    raise ConfigError(f'{binding} must be an integer, got {value!r} (a float); '
                      f'bind a whole number without a decimal point, e.g. '
                      f'{binding} = {example}.')
