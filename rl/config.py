"""The gin configuration layer: parsing, includes, one-line errors, and config differences.

`parse_config` reads the config files in order, then the bindings; an
`include` finds its file beside the file that includes it first, then from
the working directory. Every problem with the input becomes one
rl.errors.ConfigError line that names the fix: an unknown configurable or
parameter (with the closest name), a value that is not a Python literal, a
required value left unbound, a number of the wrong type (rl.configurables),
and bad values the constructors refuse (`construct`). Only gin's public API
is used. A config names the configurables of the modules imported so far;
rl.experiment imports all of the package's.
"""
import ast
import difflib
import io
import os
import re

import gin

from rl import configurables
from rl.errors import ConfigError
from rl.errors import OutputDirError
from rl.errors import UserError

# What to show as the value of a required binding that is missing.
_REQUIRED_EXAMPLES = {'RLTask.env': "'CartPole-v1'", 'train_rl.trainer_class': '@PPO'}


def parse_config(config_files, bindings):
  """Parses `config_files` in order, then `bindings`, into gin's global config.

  Raises:
    ConfigError: one line naming what is wrong and how to fix it.
  """
  for path in config_files:
    if not os.path.isfile(path):
      raise ConfigError(f"config file '{path}' does not exist; check the --config_file path."
                        + _suggest_file(path))
  try:
    for path in config_files:
      _parse_file(path, [])
    gin.parse_config(list(bindings))
  except UserError:
    raise
  except Exception as e:  # gin's own parse errors  pylint: disable=broad-except
    raise _gin_error(e) from None
  configurables.check_numeric_bindings()


class _NoReferences(gin.config_parser.ParserDelegate):
  """Lets gin's parser read a file's statements without resolving its references."""

  def configurable_reference(self, scoped_configurable_name, evaluate):
    return None

  def macro(self, macro_name):
    return None


def _named_text(text, name):
  """`text` as a file-like object named `name`: gin's parse errors then name the file."""
  f = io.StringIO(text)
  f.name = name
  return f


def _parse_file(path, chain):
  """Parses one config file with its includes, each where it stands in the file.

  gin would open an included path as written, i.e. relative to the working
  directory (google/gin-config#104), so the file is parsed in pieces between
  its include statements and each included file in between; a piece keeps
  its lines' numbers (blank lines stand in for the ones before it), so gin's
  errors name the right line. `chain`: the files that include this one.
  """
  with open(path, encoding='utf-8') as f:
    text = f.read()
  lines = io.StringIO(text).readlines()  # split as the tokenizer counts lines
  done = 0  # lines parsed so far
  for include in _includes(text, path):
    end = include.location.line_num  # the include's line, 1-based
    gin.parse_config(_named_text('\n' * done + ''.join(lines[done:end - 1]), path))
    _parse_file(_included_path(include.filename, path, chain), chain + [path])
    done = end
  gin.parse_config(_named_text('\n' * done + ''.join(lines[done:]), path))


def _includes(text, path):
  """The include statements of a config file's `text`, in order.

  They end early at a statement gin cannot read: the parse of the text up to
  there (`_parse_file`) then reports it, after any error that comes before it.
  """
  statements = gin.config_parser.ConfigParser(_named_text(text, path), _NoReferences())
  while True:
    try:
      statement = next(statements)
    except Exception:  # pylint: disable=broad-except  (StopIteration at the end, too)
      return
    if isinstance(statement, gin.config_parser.IncludeStatement):
      yield statement


def _included_path(path, including, chain):
  """Where the `include`d `path` is: beside the `including` file, else from the working dir."""
  candidates = [path] if os.path.isabs(path) else [
      os.path.join(os.path.dirname(including), path), path]
  for candidate in candidates:
    if os.path.isfile(candidate):
      if any(os.path.samefile(candidate, p) for p in chain + [including]):
        circle = ' -> '.join(chain + [including, path])
        raise ConfigError(f'the config files include each other in a circle ({circle}); '
                          'remove one of these includes.')
      return candidate
  raise ConfigError(f"'{including}' includes '{path}', which does not exist beside it nor in "
                    'the working directory; fix the include path.')


def _suggest_file(path):
  """' Did you mean ...?' with the closest .gin file in the folder `path` names, if any."""
  folder = os.path.dirname(path)
  try:
    names = [n for n in os.listdir(folder or '.') if n.endswith('.gin')]
  except OSError:
    return ''
  close = difflib.get_close_matches(os.path.basename(path), names, n=1, cutoff=0.6)
  return f" Did you mean '{os.path.join(folder, close[0])}'?" if close else ''


def _suggest(word, candidates, prefix=''):
  """' Did you mean ...?' with the candidate closest to `word` (the same but for case first),
  written after `prefix` (a reference's '@scope/')."""
  same = [c for c in candidates if c.lower() == word.lower()]
  close = same or difflib.get_close_matches(word, candidates, n=1, cutoff=0.6)
  return f" Did you mean '{prefix}{close[0]}'?" if close else ''


def _gin_error(e):
  """Turns gin's parse errors into one line with a suggestion."""
  text = ' '.join(str(e).split())
  m = re.search(r"No configurable matching reference '@([^']+)'", text)
  if m:
    # gin names the reference without its scope; the line it quotes has it.
    name = m.group(1).split('/')[-1]
    scoped = re.search(rf'@((?:[\w.]+/)*){re.escape(name)}(?![\w.])', text[m.end():])
    prefix = '@' + (scoped.group(1) if scoped else '')
    return ConfigError(f"unknown configurable '{prefix}{name}' in a reference of the gin config."
                       f"{_suggest(name, configurables.registered_names(), prefix)} "
                       "Check the reference's spelling.")
  m = re.search(r"No configurable matching '([^']+)'", text)
  if m:
    name = m.group(1).split('/')[-1]
    return ConfigError(f"unknown configurable '{name}' in the gin config."
                       f"{_suggest(name, configurables.registered_names())} "
                       "Check the binding's spelling.")
  m = re.search(r"Configurable '([^']+)' doesn't have a parameter named '([^']+)'", text)
  if m:
    selector, param = m.groups()
    if selector.split('/')[-1] == 'RLTask':
      from rl.envs import task  # pylint: disable=import-outside-toplevel  # only on this error
      misplaced = task.misplaced_binding(param, _bound_trainer())
      if misplaced:
        return ConfigError(misplaced)
    return ConfigError(f"'{selector}' has no parameter '{param}'."
                       f"{_suggest(param, configurables.parameters_of(selector))} "
                       "Fix the binding's parameter name.")
  m = re.search(r"Failed to parse token '([^']*)'", text)
  if m and isinstance(e, SyntaxError) and '=' in (e.text or ''):
    return ConfigError(_not_a_literal(m.group(1), e.text, e.filename, e.lineno))
  return ConfigError(f'bad gin config: {text[:400]}')


def _bound_trainer():
  """The name of the trainer class bound so far (train_rl.trainer_class), else None."""
  try:
    return gin.query_parameter('train_rl.trainer_class').selector
  except (ValueError, AttributeError):
    return None


def _not_a_literal(token, line, filename, lineno):
  """Says that a binding's value is not a Python literal, and shows it quoted.

  The usual cause is a string without its quotes (RLTask.env = CartPole-v1),
  on the command line often because the shell removed them from a --config
  argument that was not quoted as a whole.
  """
  name, _, value = (part.strip() for part in line.partition('='))
  if re.fullmatch(r'[\w.:/+-]+', value):  # one bare word: quote all of it
    word, quoted = value, repr(value)
  else:  # quote the word gin stopped at
    word = token
    quoted = re.sub(rf'(?<![\w\'"]){re.escape(token)}(?![\w\'"])', repr(token), value, count=1)
  if filename:
    return (f'{filename}, line {lineno}: {word}, in {name} = {value}, is not a Python literal; '
            f'a string needs quotes: {name} = {quoted}.')
  return (f'--config {name}={value}: {word} is not a Python literal; a string needs quotes, '
          f'{name}={quoted}, and the shell needs the whole binding in quotes: '
          f'--config "{name}={quoted}".')


def _missing_required(selector, params):
  """Names gin.REQUIRED parameters left unbound, and how to bind them."""
  names = [f'{selector}.{param}' for param in params]
  value = _REQUIRED_EXAMPLES.get(names[0], '<value>')
  return (f"{' and '.join(names)} {'is' if len(names) == 1 else 'are'} required but not "
          f'bound; add e.g. {names[0]} = {value} to the config file or pass '
          f'--config "{names[0]}={value}".')


def construct(cls, **kwargs):
  """Calls a gin-configured class; errors that come from the config become one line.

  Those are the UserErrors the constructors raise for bad values and
  combinations, TypeErrors of a misspelt parameter or a binding of the
  wrong type, and gin's RuntimeError for a required parameter left unbound.
  Any other exception is a bug in the code, not in the config:
  it keeps its type and traceback rather than being blamed on the bindings.
  """
  try:
    return cls(**kwargs)
  except UserError as e:
    # gin appends 'In call to configurable ...' lines; the user needs one line.
    base = next(c for c in type(e).__mro__ if c in (ConfigError, OutputDirError, UserError))
    raise base(first_sentence(str(e))) from None
  except TypeError as e:
    # gin appends a line per configurable the error passed through, innermost first.
    inner = re.findall(r"In call to configurable '([^']+)'", str(e))
    text = first_sentence(str(e))
    m = re.search(r"unexpected keyword argument '([^']+)'", text)
    if m:
      name = cls.__name__
      raise ConfigError(
          f"'{name}' has no parameter '{m.group(1)}'."
          f"{_suggest(m.group(1), configurables.parameters_of(name))} "
          "Fix the binding's parameter name.") from None
    m = re.search(r"got multiple values for keyword argument '([^']+)'", text)
    if m:  # a subclass passes this parameter to its base itself
      name = cls.__name__
      raise ConfigError(f"{name} sets {m.group(1)} itself, so it cannot be bound; remove "
                        f"the binding {name}.{m.group(1)}.") from None
    name = inner[0] if inner else cls.__name__
    bound = [f'{k} = {v}' for k, v in config_bindings(gin.config_str()).items()
             if _selector(k).split('/')[-1] == name]
    raise ConfigError(f'cannot build {name}: {text} (check the types of its gin bindings'
                      + (f": {', '.join(bound)}" if bound else '') + ').') from None
  except RuntimeError as e:
    m = re.match(r'Required bindings for `([^`]+)` not provided in config: \[([^\]]*)\]', str(e))
    if not m:
      raise
    raise ConfigError(_missing_required(m.group(1), re.findall(r"'([^']+)'", m.group(2)))) from None


def first_sentence(text):
  """The error text without gin's call-site lines, on one line."""
  text = text.split('\n  In call to configurable')[0]
  return ' '.join(text.split())[:400]


def bound_value(key):
  """The value the parsed config binds `key` to (through a macro too); None when unbound."""
  try:
    value = gin.query_parameter(key)
  except ValueError:
    return None
  if isinstance(value, gin.config.ConfigurableReference) and value.configurable.name == 'macro':
    value = value.scoped_configurable_fn()  # a macro's value; nothing else is called
  return value


def configured_env():
  """RLTask.env as the parsed config binds it (through a macro too); None when unbound
  or bound to something else (RLTask then says what is wrong)."""
  value = bound_value('RLTask.env')
  return value if isinstance(value, str) else None


def config_bindings(config_str):
  """{'selector.param': 'value'} of a gin config string (one binding a line)."""
  bindings = {}
  key = None
  for line in config_str.splitlines():
    if not line.strip() or line.lstrip().startswith('#'):
      continue
    m = re.match(r'^([\w./@-]+)\s*=\s*(.*)$', line)
    if m and not line.startswith(' '):
      key = m.group(1)
      bindings[key] = m.group(2).strip()
    elif key is not None:  # continuation of a multi-line value
      bindings[key] += ' ' + line.strip()
  return bindings


def _selector(key):
  """'scope/Selector' of a binding key 'scope/Selector.param'; a macro's name is its own."""
  return key.rpartition('.')[0] or key


def called_selectors(operative_config):
  """The 'scope/Selector' of every call the run made, from its `operative_config` text."""
  return {_selector(key) for key in config_bindings(operative_config)}


def reaches(selector, called):
  """Whether a binding of `selector` ('scope/Selector') reaches the call `called` (the same).

  gin gives a call in scope a/b the bindings of the scopes '', 'a' and 'a/b':
  an unscoped multifactor.minimum reaches @policy/multifactor.
  """
  scope, _, name = selector.rpartition('/')
  called_scope, _, called_name = called.rpartition('/')
  parts = scope.split('/') if scope else []
  return name == called_name and called_scope.split('/')[:len(parts)] == parts


def unused_bindings():
  """Keys of the parsed config's bindings whose configurable (or macro) the run never used.

  gin's operative config lists the configurables that were called, each with
  the parameters it read from the config. A binding is counted as used once
  a call of its configurable is among them, in its scope or one inside it; a
  caller that passes the parameter itself overrides it, which rl.overridden
  refuses. Call it once the run is built (rl.experiment.prepared_run).
  """
  unused = unused_keys(gin.config_str())
  return [key for key in config_bindings(gin.config_str()) if key in unused]


def unused_keys(*configs):
  """The keys bound in any of the gin texts `configs` whose configurable this run never used.

  Such a binding cannot change the run, so it is no difference when a resume
  compares configs. Call it once the run is built, as unused_bindings.
  """
  used = called_selectors(gin.operative_config_str())
  return {key for text in configs for key in config_bindings(text)
          if not any(reaches(_selector(key), called) for called in used)}


def config_to_save(unused):
  """A run's config.gin: gin's operative config, then the `unused` bindings (unused_bindings)
  as comments. It holds every binding the run was given, and comments change nothing that
  reads it (a resume from it, rl.report's groups)."""
  given = config_bindings(gin.config_str())
  return gin.operative_config_str() + (
      '\n# Bindings given to this run that it did not use (no call of their configurable):\n'
      + ''.join(f'# {key} = {given[key]}\n' for key in unused) if unused else '')


# The unused bindings the warning names; log.txt lists them all (rl.experiment).
MAX_NAMED_UNUSED = 5


def unused_bindings_warning(keys, max_named=MAX_NAMED_UNUSED):
  """One line naming the bindings of `keys` (unused_bindings) and what the run uses instead.

  Past `max_named` the line counts the rest, which the run's log.txt lists
  (rl.experiment.prepared_run writes them there).
  """
  named = ', '.join(keys[:max_named]) + (f' and {len(keys) - max_named} more (all in log.txt)'
                                         if len(keys) > max_named else '')
  used = config_bindings(gin.operative_config_str())
  runs = ', '.join(f'{k} = {used[k]}' for k in ('train_rl.trainer_class', 'RLTask.env')
                   if k in used)
  one = len(keys) == 1
  return (f"binding{'' if one else 's'} {named} {'was' if one else 'were'} not used by this "
          f"run ({runs}), so {'it has' if one else 'they have'} no effect; check the "
          "configurable's name or remove the binding.")


def _binds_default(key, value):
  """Whether binding `key` ('scope/selector.param') to the gin text `value` restates its default."""
  selector, _, param = key.rpartition('.')
  fn = configurables.find(selector)
  try:
    value = ast.literal_eval(value)
  except Exception:  # pylint: disable=broad-except  # a @reference, a macro
    return False
  if fn is None:
    return False
  default = configurables.parameter_default(fn, param)
  return type(value) is type(default) and value == default  # pylint: disable=unidiomatic-typecheck


def config_difference(old, new, new_is_operative=False, ignored=()):
  """Sorted 'name: old -> new' strings for bindings that differ (`ignored` names excepted).

  A binding that one config lacks and the other sets to its parameter's
  default is no difference: a run's saved config.gin spells out the defaults.
  With `new_is_operative` (`new` comes from a run's config.gin, which lists
  every binding the run used), a binding that only `old` has was never used.
  """
  old_b, new_b = config_bindings(old), config_bindings(new)
  diffs = []
  for k in sorted(set(old_b) | set(new_b)):
    if k in ignored or old_b.get(k) == new_b.get(k):
      continue
    if k not in new_b and new_is_operative:
      continue
    if (k not in old_b or k not in new_b) and _binds_default(k, new_b.get(k, old_b.get(k))):
      continue
    diffs.append(f'{k}: {old_b.get(k, "(unset)")} -> {new_b.get(k, "(unset)")}')
  return diffs
