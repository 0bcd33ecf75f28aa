"""Bindings the run overrides: parameters that the code calling a configurable passes itself.

gin lets an argument the caller passes win over a binding, without a word:
the trainers build every optimizer with the learning rate of their schedule
and every advantage estimator with RLTask.gamma, so `Adam.learning_rate = 0.5`
or `gae.gamma = 0.5` would change nothing while the config says otherwise.
gin's operative config lists, for each call, the parameters it took from the
config; a bound parameter of a configurable that was called, but absent from
every call that the binding reaches, was passed by the caller. Such a binding
is refused before anything is written, unless a binding of a subclass gave
the value (`_bound_on_a_subclass`). A configurable declares what sets such
a parameter (rl.configurables.configurable's set_by_caller), and the refusal
names it; a sweep refuses a grid over a declared one before any run starts.
"""
import gin

from rl import config
from rl import configurables
from rl.errors import ConfigError


def overridden_keys(*configs):
  """The keys bound in any of the gin texts `configs` that the run's callers overrode.

  Call it once the run is built, as config.unused_keys. A binding whose
  configurable was never called is unused, not overridden.
  """
  operative = config.config_bindings(gin.operative_config_str())
  called = config.called_selectors(gin.operative_config_str())
  found = set()
  for key in (key for text in configs for key in config.config_bindings(text)):
    selector, _, param = key.rpartition('.')
    calls = [c for c in called if selector and config.reaches(selector, c)]
    if (calls and not any(f'{c}.{param}' in operative for c in calls)
        and not _bound_on_a_subclass(selector, param, operative)):
      found.add(key)
  return found


def _bound_on_a_subclass(selector, param, operative):
  """Whether a subclass of `selector`'s class took `param` from the config and passed it on.

  KLPPO.n_eval_episodes reaches PPO's constructor through **kwargs, so a
  PPO.n_eval_episodes of an included config is overridden by that binding,
  as a later binding overrides an earlier one: the config's own layering.
  """
  base = configurables.find(selector)
  if not isinstance(base, type):
    return False
  for key in operative:
    other, _, name = key.rpartition('.')
    sub = configurables.find(other)
    if name == param and isinstance(sub, type) and sub is not base and issubclass(sub, base):
      return True
  return False


def overridden_bindings():
  """[(key, value)] of the parsed config's bindings that the run's callers overrode."""
  keys = overridden_keys(gin.config_str())
  return [(k, v) for k, v in config.config_bindings(gin.config_str()).items() if k in keys]


def refusal(key, value, bindings):
  """The one line refusing binding `key` = `value`, naming what sets the parameter.

  bindings: the run's {key: value} bindings, from which a declared setter
  names the bindings that control the value (the lr schedules).
  """
  selector, _, param = key.rpartition('.')
  name = selector.split('/')[-1]
  setter = configurables.setter_of(selector, param)
  if callable(setter):
    setter = setter(bindings)
  if setter:
    return (f'{key} = {value} has no effect: the run passes {param} to {name} itself, from '
            f'{setter}; bind that instead and remove {key}.')
  return (f'{key} = {value} has no effect: the code that calls {name} passes {param} itself, '
          f'which overrides the binding; remove {key}, and set the value where that caller '
          'takes it.')


def check_run():
  """Refuses the first binding the built run overrode (ConfigError), naming any others."""
  found = overridden_bindings()
  if found:
    operative = config.config_bindings(gin.operative_config_str())
    others = ', '.join(key for key, _ in found[1:])
    raise ConfigError(refusal(*found[0], operative)
                      + (f' (Also overridden: {others}.)' if others else ''))


def check_declared(keys):
  """Refuses, before anything is built, a binding of `keys` that a declared caller sets.

  For a sweep's grid keys ('Selector.param'), with the point's config parsed:
  every run of such a grid would train the same.
  """
  bindings = config.config_bindings(gin.config_str())
  for key in keys:
    selector, _, param = key.rpartition('.')
    if selector and configurables.setter_of(selector, param):
      raise ConfigError(refusal(key, bindings.get(key, '...'), bindings))
