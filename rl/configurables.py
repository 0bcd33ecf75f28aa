"""What the package's gin configurables are called and accept, and the type check of numbers.

The friendly errors of rl.config suggest names from here ("did you mean"),
and `check_numeric_bindings` refuses a value of the wrong type for a numeric
parameter before anything runs. Everything goes through gin's public API
(gin.get_configurable, gin.config_str, gin.query_parameter); gin lists no
registered names, so `registered_names` reads them from the package's sources.
"""
import ast
import inspect
import math
import re
import sys
import textwrap

import gin

from rl.errors import ConfigError

# Integer parameters whose default is None (their other integer parameters
# are recognised by their integer defaults).
_INTEGER_PARAMETERS_WITHOUT_DEFAULT = frozenset((
    'n_trajectories_per_epoch', 'n_interactions_per_epoch', 'collect_per_epoch',
    'max_steps', 'time_limit'))
_PACKAGE = __name__.split('.')[0]


def find(selector):
  """The function or class gin calls for `selector` (scope ignored); None if gin has none."""
  try:
    return gin.get_configurable(selector.split('/')[-1])
  except (ValueError, KeyError):  # unknown, or a name that matches several
    return None


def registered_names():
  """The names of the configurables that this package's imported modules register with gin.

  gin has no public listing of its registry, so they are read from the
  sources of the imported modules: each `@gin.configurable` or `@gin.register`
  (its name argument, else the decorated name) and `gin.external_configurable`
  call. Only names that gin resolves are kept.
  """
  names = set()
  for name, module in list(sys.modules.items()):
    if name.split('.')[0] != _PACKAGE or not getattr(module, '__file__', None):
      continue
    with open(module.__file__, encoding='utf-8') as f:
      names.update(_names_registered_in(ast.parse(f.read())))
  return sorted(name for name in names if find(name) is not None)


def _names_registered_in(tree):
  for node in ast.walk(tree):
    if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
      for decorator in node.decorator_list:
        call = decorator if isinstance(decorator, ast.Call) else None
        if _is_gin_function(call.func if call else decorator, ('configurable', 'register')):
          yield (_string_argument(call, 0, 'name_or_fn') if call else None) or node.name
    elif isinstance(node, ast.Call) and _is_gin_function(node.func, ('external_configurable',)):
      name = _string_argument(node, 1, 'name')
      if name:
        yield name


def _is_gin_function(node, names):
  return (isinstance(node, ast.Attribute) and node.attr in names
          and isinstance(node.value, ast.Name) and node.value.id == 'gin')


def _string_argument(call, position, keyword):
  """The string constant given to `call` at `position` or as `keyword`, else None."""
  values = call.args[position:position + 1] + [k.value for k in call.keywords
                                                if k.arg == keyword]
  for value in values:
    if isinstance(value, ast.Constant) and isinstance(value.value, str):
      return value.value.split('.')[-1]
  return None


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


def _set_for_bases(cls):
  """The parameters of its bases that `cls.__init__` sets itself, so a config cannot.

  Those it passes by keyword to `super().__init__(...)` and those it writes
  into its **kwargs (`kwargs['q_value'] = True`): a binding of one would clash
  with, or be overwritten by, the class's own value.
  """
  init = cls.__dict__.get('__init__')
  try:
    tree = ast.parse(textwrap.dedent(inspect.getsource(init)))
  except (OSError, TypeError):  # no __init__ of its own, or no source
    return frozenset()
  varkw = inspect.getfullargspec(inspect.unwrap(init)).varkw
  names = set()
  for node in ast.walk(tree):
    if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
        and node.func.attr == '__init__' and isinstance(node.func.value, ast.Call)
        and isinstance(node.func.value.func, ast.Name) and node.func.value.func.id == 'super'):
      names.update(k.arg for k in node.keywords if k.arg)
    elif isinstance(node, ast.Assign):
      names.update(t.slice.value for t in node.targets
                   if isinstance(t, ast.Subscript) and isinstance(t.value, ast.Name)
                   and t.value.id == varkw and isinstance(t.slice, ast.Constant))
  return frozenset(names)


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
      seen.update(_set_for_bases(target))


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
  try:
    number = ast.literal_eval(text.strip())
  except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
    number = None
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
  one when its default is a float.
  """
  for binding in _bound_keys():
    selector, _, name = binding.rpartition('.')
    fn = find(selector)
    if fn is None:
      continue
    value = gin.query_parameter(binding)
    if not isinstance(value, (bool, float, str)):
      continue
    default = parameter_default(fn, name)
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
