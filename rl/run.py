r"""The runner: `python -m rl.run --config_file=configs/X.gin [--config 'A.b=1'] [--output_dir=D]`.

Config files are parsed in order, then the --config bindings, then --seed.
Everything that can be wrong with the input (config, env, action space,
output folder) is checked before the first write to the output folder, and
reported as one line with a non-zero exit. Rerunning the same command on the
same folder resumes from the last checkpoint; so does `--output_dir=D` alone,
from the config the run saved in D. Compiled programs are kept in JAX's
persistent compilation cache (rl/compilation_cache.py; --compilation_cache_dir).

Start-up: nothing here compiles or touches a device at import time, and what a
run needs only later (orbax at the first checkpoint, tensorboardX at the first
epoch's end) is imported then, so a run reaches its first epoch soon after
jax, flax and optax are imported (benchmarks/startup.py measures it).
"""
import ast
import atexit
import contextlib
import difflib
import fcntl
import importlib
import inspect
import logging
import math
import os
import re
import sys
import tempfile
import threading
import time

from absl import app
from absl import flags
from absl import logging as absl_logging
import gin

# Imported for their gin registrations, so configs can name them.
from rl.ops import advantages  # pylint: disable=unused-import
from rl import compilation_cache
from rl import compiler
from rl import cpu_dispatch
from rl.ops import distributions  # pylint: disable=unused-import
from rl.envs import gymnax_envs as jax_envs
from rl.nets import cnn  # pylint: disable=unused-import
from rl.nets import heads  # pylint: disable=unused-import
from rl.nets import mlp  # pylint: disable=unused-import
from rl.nets import normalizer  # pylint: disable=unused-import
from rl import algorithms as trainers  # pylint: disable=unused-import
from rl.data.checkpoints import Checkpointer
from rl.errors import ConfigError
from rl.errors import Interrupted
from rl.errors import NonFiniteLossError
from rl.errors import OutputDirError
from rl.errors import UserError
from rl.learner import loop as loop_lib
from rl.metrics import MetricsWriter
from rl.metrics import format_return
from rl.optim import lr_schedules  # pylint: disable=unused-import
from rl.optim import optimizers  # pylint: disable=unused-import
from rl.envs.task import RLTask

FLAGS = flags.FLAGS
flags.DEFINE_multi_string('config_file', [], 'Gin config files, parsed in order.')
flags.DEFINE_multi_string('config', [], 'Gin bindings applied after the files, e.g. '
                          "'RLTask.gamma = 0.95'.")
flags.DEFINE_string('output_dir', None, 'The run folder (default: runs/<stem of the '
                    'first config file>).')
flags.DEFINE_integer('seed', None, 'Overrides RLTask.seed.')
flags.DEFINE_string('seeds', None, "Several seeds, e.g. '0-7' or '0,3,5': one ordinary run "
                    'folder <output_dir>/seed_<n> each. On JAX-native envs (gymnax:) they '
                    'train together, vmapped in one compiled call per epoch; on gymnasium envs '
                    'one after the other.')
flags.DEFINE_bool('allow_config_change', False, 'Resume a run whose config differs '
                  'from the one it was started with (on purpose).')
flags.DEFINE_string('compilation_cache_dir', None, "JAX's persistent compilation cache "
                    "folder; '', off or none turns the cache off. Default: "
                    '$RL_COMPILATION_CACHE_DIR if set (a folder, or off), else '
                    '$XDG_CACHE_HOME/rl/jax_compilation_cache (~/.cache/rl/jax_compilation_cache).')

CHECKPOINT_DIR = 'checkpoints'
CONFIG_FILE = 'config.gin'
# Bindings that may change between a run and its resume.
RESUMABLE_BINDINGS = ('train_rl.n_epochs', 'train_rl.stop_at_return')
# When set, rl.run appends '<event> <time.time()>' lines to this file as it
# reaches 'main' (imports done, flags parsed), 'first_epoch_start' (the first
# epoch this process runs begins) and 'first_epoch_end' (its record and
# console line are written). benchmarks/startup.py reads them.
TIMING_ENV_VAR = 'RL_TIMING_FILE'


@gin.configurable(denylist=['task', 'output_dir'])
def train_rl(output_dir=None, trainer_class=gin.REQUIRED, n_epochs=100,
             checkpoint_every=10, stop_at_return=None, task=None):
  """Builds the trainer and runs it to `n_epochs` total epochs, resuming if it can.

  Args:
    output_dir: the run folder (from the runner; not bindable in gin).
    trainer_class: the trainer, e.g. @PolicyGradientTrainer.
    n_epochs: total epochs of the run; raise it to extend a finished run.
    checkpoint_every: checkpoint every this many epochs (and after the last).
    stop_at_return: stop early once the greedy eval return reaches this
      (None: run all n_epochs). Benchmarks use it to stop at their target.
    task: the RLTask (from the runner).
  """
  return _Run(output_dir, trainer_class, n_epochs, checkpoint_every, stop_at_return, task)


class _Run:
  """The parts of one run, built (and validated) before anything is written."""

  def __init__(self, output_dir, trainer_class, n_epochs, checkpoint_every, stop_at_return,
               task):
    self.output_dir = output_dir
    self.stop_at_return = stop_at_return
    self.n_epochs = int(n_epochs)
    self.checkpoint_every = int(checkpoint_every)
    if self.n_epochs < 0 or self.checkpoint_every < 1:
      raise ConfigError('train_rl.n_epochs must be >= 0 and train_rl.checkpoint_every >= 1.')
    if not isinstance(trainer_class, type):
      raise ConfigError('train_rl.trainer_class must be a trainer class, e.g. '
                        'train_rl.trainer_class = @PolicyGradientTrainer.')
    self.trainer = construct(trainer_class, task=task, output_dir=output_dir)


def _registered_names():
  registry = gin.config._REGISTRY  # pylint: disable=protected-access
  return sorted({selector.split('.')[-1] for selector, _ in registry.items()})


def _signatures(fn):
  """The parameters of a configurable's signatures, nearest first (up the MRO for a class).

  Trainers pass most parameters on through **kwargs, so a class's own
  signature does not list them; its bases' signatures do.
  """
  targets = fn.__mro__ if isinstance(fn, type) else [fn]
  for target in targets:
    init = target.__init__ if isinstance(target, type) else target
    try:
      yield inspect.signature(init).parameters
    except (TypeError, ValueError):
      continue


def _parameters_of(selector):
  """All keyword parameters a configurable accepts (following **kwargs up the MRO)."""
  try:
    fn = gin.config._REGISTRY.get_match(selector).wrapped  # pylint: disable=protected-access
  except Exception:  # pylint: disable=broad-except
    return []
  names = set()
  for params in _signatures(fn):
    names.update(p for p, v in params.items()
                 if v.kind not in (v.VAR_KEYWORD, v.VAR_POSITIONAL) and p != 'self')
  return sorted(names)


# Integer parameters whose default is None (their other integer parameters
# are recognised by their integer defaults).
_INTEGER_PARAMETERS_WITHOUT_DEFAULT = frozenset((
    'n_trajectories_per_epoch', 'n_interactions_per_epoch', 'collect_per_epoch',
    'max_steps', 'time_limit'))


def _parameter_default(fn, name):
  """The default of parameter `name` of a configurable (following **kwargs up the MRO)."""
  for params in _signatures(fn):
    if name in params:
      return params[name].default
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
  registry = gin.config._REGISTRY  # pylint: disable=protected-access
  for (scope, selector), params in gin.config._CONFIG.items():  # pylint: disable=protected-access
    try:
      fn = registry.get_match(selector).wrapped
    except Exception:  # pylint: disable=broad-except
      continue
    for name, value in params.items():
      if not isinstance(value, (bool, float, str)):
        continue
      default = _parameter_default(fn, name)
      kind = _numeric_kind(name, default)
      if kind is None or (kind == 'a number' and isinstance(value, float)):
        continue
      binding = f"{scope + '/' if scope else ''}{selector.split('.')[-1]}.{name}"
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


def _suggest(word, candidates):
  close = difflib.get_close_matches(word, candidates, n=1, cutoff=0.6)
  return f" Did you mean '{close[0]}'?" if close else ''


def _gin_error(e):
  """Turns gin's parse errors into one line with a suggestion."""
  text = ' '.join(str(e).split())
  m = re.search(r"No configurable matching '([^']+)'", text)
  if m:
    name = m.group(1).split('/')[-1]
    return ConfigError(f"unknown configurable '{name}' in the gin config."
                       f"{_suggest(name, _registered_names())} Check the binding's spelling.")
  m = re.search(r"Configurable '([^']+)' doesn't have a parameter named '([^']+)'", text)
  if m:
    selector, param = m.groups()
    return ConfigError(f"'{selector}' has no parameter '{param}'."
                       f"{_suggest(param, _parameters_of(selector))} "
                       "Fix the binding's parameter name.")
  m = re.search(r"Failed to parse token '([^']*)'", text)
  if m and isinstance(e, SyntaxError) and '=' in (e.text or ''):
    return ConfigError(_not_a_literal(m.group(1), e.text, e.filename, e.lineno))
  return ConfigError(f'bad gin config: {text[:400]}')


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


# What to show as the value of a required binding that is missing.
_REQUIRED_EXAMPLES = {'RLTask.env': "'CartPole-v1'", 'train_rl.trainer_class': '@PPO'}


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
    text = ' '.join(str(e).split())
    m = re.search(r"unexpected keyword argument '([^']+)'", text)
    if m:
      name = cls.__name__
      return_error = ConfigError(
          f"'{name}' has no parameter '{m.group(1)}'."
          f"{_suggest(m.group(1), _parameters_of(name))} Fix the binding's parameter name.")
      raise return_error from None
    raise ConfigError(f'cannot build {cls.__name__}: {first_sentence(text)} '
                      '(check the types of its gin bindings).') from None
  except RuntimeError as e:
    m = re.match(r'Required bindings for `([^`]+)` not provided in config: \[([^\]]*)\]', str(e))
    if not m:
      raise
    raise ConfigError(_missing_required(m.group(1), re.findall(r"'([^']+)'", m.group(2)))) from None


def first_sentence(text):
  """The error text without gin's call-site lines, on one line."""
  text = text.split('\n  In call to configurable')[0]
  return ' '.join(text.split())[:400]


@contextlib.contextmanager
def _includes_beside_their_file():
  """Makes gin look for an `include`d file beside the file that includes it first.

  gin opens an included path as written, so relative to the working directory
  (google/gin-config#104): `include 'base.gin'` in configs/x.gin would work
  only when run from configs/. gin opens every config file, given or
  included, through gin.config.parse_config_file, so wrapping that function
  sees each include with the file that holds it (nested ones too). A path
  that is not beside the including file is still looked up from the working
  directory, where it used to be found.
  """
  original = gin.config.parse_config_file
  parsing = []  # the files being parsed, the innermost last

  def parse_config_file(path, *args, **kwargs):
    if parsing:
      path = _included_path(path, parsing[-1])
    parsing.append(path)
    try:
      return original(path, *args, **kwargs)
    finally:
      parsing.pop()

  gin.config.parse_config_file = parse_config_file
  try:
    yield
  finally:
    gin.config.parse_config_file = original


def _included_path(path, including):
  """Where the `include`d `path` is: beside the `including` file, else from the working dir."""
  candidates = [path] if os.path.isabs(path) else [
      os.path.join(os.path.dirname(including), path), path]
  for candidate in candidates:
    if os.path.isfile(candidate):
      return candidate
  raise ConfigError(f"'{including}' includes '{path}', which does not exist beside it nor in "
                    'the working directory; fix the include path.')


def parse_config(config_files, bindings):
  for path in config_files:
    if not os.path.isfile(path):
      raise ConfigError(f"config file '{path}' does not exist; check the --config_file path.")
  try:
    with _includes_beside_their_file():
      gin.parse_config_files_and_bindings(config_files, bindings, finalize_config=False)
  except UserError as e:
    # Ours, raised inside gin, which appends the include's location on more lines.
    raise ConfigError(str(e).splitlines()[0]) from None
  except Exception as e:  # gin's own parse errors  pylint: disable=broad-except
    raise _gin_error(e) from None
  check_numeric_bindings()


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


def _binds_default(key, value):
  """Whether binding `key` ('scope/selector.param') to the gin text `value` restates its default."""
  selector, _, param = key.rpartition('.')
  registry = gin.config._REGISTRY  # pylint: disable=protected-access
  try:
    fn = registry.get_match(selector.split('/')[-1]).wrapped
    value = ast.literal_eval(value)
  except Exception:  # pylint: disable=broad-except  # an unknown name, a @reference
    return False
  default = _parameter_default(fn, param)
  return type(value) is type(default) and value == default  # pylint: disable=unidiomatic-typecheck


def config_difference(old, new, new_is_operative=False):
  """Sorted 'name: old -> new' strings for bindings that differ (RESUMABLE_BINDINGS excepted).

  A binding that one config lacks and the other sets to its parameter's
  default is no difference: a run's saved config.gin spells out the defaults.
  With `new_is_operative` (`new` comes from a run's config.gin, which lists
  every binding the run used), a binding that only `old` has was never used.
  """
  old_b, new_b = config_bindings(old), config_bindings(new)
  diffs = []
  for k in sorted(set(old_b) | set(new_b)):
    if k in RESUMABLE_BINDINGS or old_b.get(k) == new_b.get(k):
      continue
    if k not in new_b and new_is_operative:
      continue
    if (k not in old_b or k not in new_b) and _binds_default(k, new_b.get(k, old_b.get(k))):
      continue
    diffs.append(f'{k}: {old_b.get(k, "(unset)")} -> {new_b.get(k, "(unset)")}')
  return diffs


def check_output_dir(path):
  """Fails early if `path` is a file or nothing can be written where it would live.

  The probe is a real write (a temporary folder, removed at once): os.access
  says yes to root even on filesystems that refuse writes.
  """
  if os.path.exists(path) and not os.path.isdir(path):
    raise OutputDirError(f"output folder '{path}' is a file; pass another --output_dir.")
  probe = os.path.abspath(path)
  while not os.path.exists(probe):
    probe = os.path.dirname(probe)
  try:
    os.rmdir(tempfile.mkdtemp(prefix='.rl-write-probe-', dir=probe))
  except OSError as e:
    raise OutputDirError(f"output folder '{path}' is not writable ({e.strerror} in "
                         f"'{probe}'); pass a folder you can write to.") from None


@contextlib.contextmanager
def folder_lock(path):
  """An exclusive lock on the run folder; the OS drops it if the process dies."""
  lock_path = os.path.join(path, '.lock')
  with open(lock_path, 'a+') as f:
    try:
      fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
      f.seek(0)
      holder = f.read().strip() or 'another process'
      raise OutputDirError(f"output folder '{path}' is in use by a running run "
                           f'(pid {holder}); wait for it or pick another --output_dir.') from None
    f.seek(0)
    f.truncate()
    f.write(str(os.getpid()))
    f.flush()
    try:
      yield
    finally:
      fcntl.flock(f, fcntl.LOCK_UN)


def _setup_logging(output_dir, prefix=''):
  """The run's logger: console lines (after `prefix`) and <output_dir>/log.txt.

  One logger per folder, so that several runs in one process (--seeds)
  each write their own log.
  """
  logger = logging.getLogger('rl' if not prefix else f'rl.{os.path.abspath(output_dir)}')
  logger.setLevel(logging.INFO)
  logger.propagate = False
  for h in list(logger.handlers):
    logger.removeHandler(h)
  console = logging.StreamHandler(sys.stdout)
  console.setFormatter(logging.Formatter(prefix.replace('%', '%%') + '%(message)s'))
  logger.addHandler(console)
  log_file = logging.FileHandler(os.path.join(output_dir, 'log.txt'))
  log_file.setFormatter(logging.Formatter('%(asctime)s %(message)s'))
  logger.addHandler(log_file)
  return logger


def saved_config(output_dir):
  """The config.gin of the run in `output_dir`, to resume it without its config files."""
  if output_dir is None:
    raise ConfigError('give --config_file=<file.gin> to start a run, or --output_dir=<run '
                      'folder> to resume one.')
  path = os.path.join(output_dir, CONFIG_FILE)
  if not os.path.isfile(path):
    raise OutputDirError(f"'{output_dir}' holds no run to resume (no {CONFIG_FILE}); give "
                         '--config_file=<file.gin> to start one there.')
  return path


class PreparedRun:
  """One run folder, built, locked and restored, ready to train (see `prepared_run`)."""

  def __init__(self, run, output_dir, checkpointer, full_config, log, writer):
    self.run = run
    self.trainer = run.trainer
    self.learner = run.trainer.learner
    self.output_dir = output_dir
    self.checkpointer = checkpointer
    self.full_config = full_config
    self.log = log
    self.writer = writer
    self._first_line = True

  def save(self):
    arrays, meta = self.learner.state_dict()
    meta['config'] = self.full_config
    self.checkpointer.save(self.learner.epoch, arrays, meta)

  def log_epoch(self, line):
    self.log.info(line)
    if self._first_line:
      self._first_line = False
      mark_time('first_epoch_end')

  def epoch_loop(self):
    """The learner's EpochLoop with this run's checkpoints, metrics and console."""
    from rl.learner.loop import EpochLoop  # pylint: disable=import-outside-toplevel
    return EpochLoop(self.learner, self.run.n_epochs, self.save, self.run.checkpoint_every,
                     self.writer, self.log_epoch, self.run.stop_at_return)

  def interrupted(self):
    """The Interrupted error of a Ctrl-C now: where the run stopped, how to resume."""
    return Interrupted(interrupted_message(self.output_dir, *self.stopped_at()))

  def stopped_at(self):
    """(epoch in progress, n_epochs, epoch of the last checkpoint or None), for a Ctrl-C now."""
    # The epoch in progress is the one after the last logged (at most the last).
    epoch = min(len(self.learner.history) + 1, self.run.n_epochs)
    return epoch, self.run.n_epochs, last_checkpoint(self.checkpointer)

  def non_finite(self, e):
    """`e` (a NonFiniteLossError) with what this run's checkpoints and config allow."""
    return NonFiniteLossError(e.metric, e.value, e.step, what_now=after_non_finite(
        last_checkpoint(self.checkpointer), gin.operative_config_str()))

  def log_done(self):
    learner = self.learner
    last = learner.history[-1] if learner.history else {}
    self.log.info('Training is done: %d epochs, %d env steps, eval return %s. Outputs in %s.',
                  learner.epoch, learner.task.n_interactions,
                  format_return(last.get('eval_return')), self.output_dir)


def configured_env():
  """RLTask.env as the parsed config binds it (through a macro too); None when unbound
  or bound to something else (RLTask then says what is wrong)."""
  try:
    value = gin.query_parameter('RLTask.env')
  except ValueError:
    return None
  if isinstance(value, gin.config.ConfigurableReference) and value.configurable.name == 'macro':
    value = value.scoped_configurable_fn()  # a macro's value; nothing else is called
  return value if isinstance(value, str) else None


@contextlib.contextmanager
def prepared_run(config_files, bindings, output_dir=None, seed=None, allow_config_change=False,
                 log_prefix=''):
  """Parses the config, builds and resumes one run; yields its PreparedRun.

  Without `config_files`, the run in `output_dir` resumes from its saved
  config. Everything that can be wrong is checked before the folder is
  written to; the folder stays locked until the context exits, which closes
  the run's writer, checkpointer and envs. log_prefix: put before every
  console line (several runs in one process).
  """
  gin.clear_config()
  from_saved_config = not config_files
  if from_saved_config:
    config_files = [saved_config(output_dir)]
  bindings = list(bindings)
  if seed is not None:
    bindings.append(f'RLTask.seed = {int(seed)}')
  parse_config(config_files, bindings)
  # Which kernels every program of the run compiles to (`compiler.fast_compile`).
  construct(compiler.configure)
  # Before the process's first computation: runs whose envs step on the host
  # call their policy once a step and read it at once, so they dispatch inline.
  cpu_dispatch.choose(inline=not jax_envs.is_jax_env(configured_env()))
  if output_dir is None:
    stem = os.path.splitext(os.path.basename(config_files[0]))[0]
    output_dir = os.path.join('runs', stem)
  check_output_dir(output_dir)
  full_config = gin.config_str()

  task = construct(RLTask)
  run = construct(train_rl, output_dir=output_dir, task=task)
  learner = run.trainer.learner

  os.makedirs(output_dir, exist_ok=True)
  with folder_lock(output_dir):
    checkpointer = Checkpointer(os.path.join(output_dir, CHECKPOINT_DIR))
    restored = checkpointer.restore_latest()
    if restored is not None:
      _, arrays, meta = restored
      diffs = config_difference(meta.get('config', ''), full_config,
                                new_is_operative=from_saved_config)
      if diffs and not allow_config_change:
        raise OutputDirError(
            f"output folder '{output_dir}' holds a run with a different config ("
            + '; '.join(diffs) + '); use another --output_dir, or '
            '--allow_config_change to resume it anyway.')
      if meta['epoch'] > run.n_epochs:
        raise ConfigError(
            f"train_rl.n_epochs ({run.n_epochs}) is lower than the {meta['epoch']} epochs "
            f"already finished in '{output_dir}'; raise n_epochs or use another --output_dir.")
      try:
        learner.load_state_dict(arrays, meta)
      except (ValueError, KeyError, TypeError) as e:
        raise ConfigError(
            f"the checkpoint in '{output_dir}' does not fit the configured model or "
            f'optimizer ({first_sentence(str(e))[:200]}); a changed binding altered their '
            'shapes. Use another --output_dir.') from None
    else:
      learner.collect_initial()
    log = _setup_logging(output_dir, log_prefix)
    with open(os.path.join(output_dir, CONFIG_FILE), 'w') as f:
      f.write(gin.operative_config_str())
    if restored is not None:
      log.info('Resuming %s from epoch %d.', output_dir, learner.epoch)
      if learner.task.resume_warning:
        log.warning('Warning: %s', learner.task.resume_warning)
    writer = MetricsWriter(output_dir, learner.history, run.trainer.summary_dirs)
    try:
      yield PreparedRun(run, output_dir, checkpointer, full_config, log, writer)
    finally:
      writer.close()
      checkpointer.close()
      learner.close()


def execute(config_files, bindings, output_dir=None, seed=None, allow_config_change=False):
  """Parses the config, builds, resumes and runs. Returns the finished trainer.

  Without `config_files`, the run in `output_dir` resumes from its saved config.
  """
  with prepared_run(config_files, bindings, output_dir, seed, allow_config_change) as prepared:
    train(prepared)
  prepared.log_done()
  return prepared.trainer


def train(prepared):
  """Runs a PreparedRun's epochs, turning Ctrl-C and NaN stops into their one-line errors."""
  run = prepared.run
  try:
    if prepared.learner.epoch < run.n_epochs:
      mark_time('first_epoch_start')
    loop_lib.run(prepared.epoch_loop())
  except KeyboardInterrupt:
    raise prepared.interrupted() from None
  except NonFiniteLossError as e:
    raise prepared.non_finite(e) from None


def execute_seeds(config_files, bindings, output_dir, seeds, allow_config_change=False):
  """Runs `seeds` of one config, each in its own folder <output_dir>/seed_<n>.

  On JAX-native envs the seeds train together, vmapped in one compiled call
  per epoch (rl.seeds); on gymnasium envs one after the other. Each folder is
  an ordinary run: it resumes, and rl.evaluate and rl.report read it.
  Returns the trainers.
  """
  from rl import seeds as seeds_lib  # pylint: disable=import-outside-toplevel
  if output_dir is None:
    if not config_files:
      raise ConfigError('give --config_file=<file.gin> or the --output_dir of the seeds.')
    output_dir = os.path.join('runs', os.path.splitext(os.path.basename(config_files[0]))[0])
  folders = [os.path.join(output_dir, f'seed_{seed}') for seed in seeds]
  with contextlib.ExitStack() as stack:
    runs = []
    for seed, folder in zip(seeds, folders):
      files = config_files or [saved_config(folder)]
      runs.append(stack.enter_context(prepared_run(
          files, bindings, folder, seed, allow_config_change, log_prefix=f'seed {seed}: ')))
    if not runs[0].learner.task.jax_native:
      for prepared in runs:
        train(prepared)
    else:
      seeds_lib.train_together(runs)
  for prepared in runs:
    prepared.log_done()
  return [prepared.trainer for prepared in runs]


# Modules a run imports on its way, in the order it needs them, loaded ahead
# by prefetch_imports: scipy's BLAS and LAPACK bindings, which jaxlib loads
# (a quarter of a second, with scipy) when it first lowers a QR, i.e. the
# orthogonal initialisers of the networks; then what the run needs only after
# its first epoch (the metrics writer's TensorBoard events, the first
# checkpoint), which is therefore not imported at start-up.
PREFETCHED_IMPORTS = ('scipy.linalg.cython_blas', 'scipy.linalg.cython_lapack', 'tensorboardX',
                    'orbax.checkpoint')


def prefetch_imports(modules):
  """Imports `modules` on a background thread; returns the thread.

  The main thread spends the first epoch mostly in XLA's compiler and the
  env loop, which release the GIL, so the imports (tenths of a second each)
  run alongside instead of after them. Python's import lock makes a main
  thread that needs a module early wait for the import in flight. A module
  that fails to import is left to fail where it is used, with its error.
  """
  def load():
    for name in modules:
      try:
        importlib.import_module(name)
      except Exception:  # pylint: disable=broad-except
        pass
  thread = threading.Thread(target=load, name='rl-prefetch-imports')
  thread.start()
  return thread


def mark_time(event):
  """Appends '<event> <wall seconds>' to $RL_TIMING_FILE, if set (for benchmarks/startup.py)."""
  path = os.environ.get(TIMING_ENV_VAR)
  if path:
    with open(path, 'a') as f:
      f.write(f'{event} {time.time():.6f}\n')


def last_checkpoint(checkpointer):
  """The epoch of the newest checkpoint on disk, or None."""
  return max(checkpointer.all_steps(), default=None)


def interrupted_message(output_dir, epoch, n_epochs, checkpoint_epoch):
  """Where a Ctrl-C stopped the run and what a rerun of the same command does."""
  where = f'interrupted in epoch {epoch}/{n_epochs}'
  if checkpoint_epoch is None:
    return f'{where}; no checkpoint was written yet: rerun the same command to start it again.'
  path = os.path.join(output_dir, CHECKPOINT_DIR, str(checkpoint_epoch))
  return (f'{where}; the last checkpoint is epoch {checkpoint_epoch} ({path}): rerun the same '
          'command to resume from it.')


def after_non_finite(checkpoint_epoch, operative_config):
  """What a NaN stop leaves and what to change, true to the run's checkpoints and clipping.

  A changed learning rate is a changed config, which a resume refuses
  without --allow_config_change; the clipping advice names an optimizer that
  is used without clipping, or says that every one clips already.
  """
  clipping = {k: v for k, v in config_bindings(operative_config).items()
              if k.endswith('.clip_grad_norm')}
  unclipped = [k for k, v in clipping.items() if v == 'None']
  if unclipped or not clipping:
    fix = ('lower the learning rate or enable gradient clipping (e.g. '
           f"{unclipped[0] if unclipped else 'Adam.clip_grad_norm'} = 0.5)")
  else:
    settings = ', '.join(f'{k} = {v}' for k, v in clipping.items())
    fix = f'gradient clipping is already on ({settings}), so lower the learning rate'
  if checkpoint_epoch is None:
    return f'no checkpoint was written yet. To retry, {fix} and rerun.'
  return (f'the last good checkpoint (epoch {checkpoint_epoch}) is kept. To go on, {fix} and '
          'rerun with --allow_config_change (or start over in another --output_dir).')


def stray_arguments(args):
  """Says what to do with arguments given without a flag."""
  for arg in args:
    if arg.endswith('.gin') or os.path.isfile(arg):
      return f"unexpected argument '{arg}'; a config file goes in --config_file={arg}."
  return f'unexpected arguments {args}; bindings go in --config.'


def flags_parser(program):
  """absl's flag parsing, with a bad flag reported as one line and exit 2 like other bad input.

  absl's own parser prints two lines and exits 1.
  """
  def parse(argv):
    try:
      return FLAGS(argv)
    except flags.Error as e:
      message = ' '.join(str(e).split())
      m = re.match(r'flag --(\w+)=', message)
      if m and m.group(1) in FLAGS:
        message += f'; --{m.group(1)} takes {FLAGS[m.group(1)].flag_type()} values'
      print(f'{program}: error: {message} ({program} --helpshort lists the flags).',
            file=sys.stderr)
      sys.exit(2)
  return parse


def main(argv):
  mark_time('main')
  # orbax logs every checkpoint step at INFO through absl; the console is ours.
  absl_logging.set_verbosity(absl_logging.WARNING)
  if len(argv) > 1:
    print(f'rl.run: error: {stray_arguments(argv[1:])}', file=sys.stderr)
    sys.exit(2)
  # Before anything compiles: nothing is compiled at import time.
  compilation_cache.configure(FLAGS.compilation_cache_dir, 'rl.run')
  prefetch_imports(PREFETCHED_IMPORTS)
  try:
    if FLAGS.seeds is not None:
      if FLAGS.seed is not None:
        raise ConfigError('give --seed or --seeds, not both.')
      from rl.seeds import parse_seeds  # pylint: disable=import-outside-toplevel
      execute_seeds(FLAGS.config_file, FLAGS.config, FLAGS.output_dir,
                    parse_seeds(FLAGS.seeds), FLAGS.allow_config_change)
    else:
      execute(FLAGS.config_file, FLAGS.config, FLAGS.output_dir, FLAGS.seed,
              FLAGS.allow_config_change)
  except UserError as e:
    print(f'rl.run: error: {e}', file=sys.stderr)
    sys.exit(2)
  except NonFiniteLossError as e:
    print(f'rl.run: error: {e}', file=sys.stderr)
    sys.exit(1)
  except Interrupted as e:
    print(f'rl.run: {e}', file=sys.stderr)
    sys.exit(130)
  except KeyboardInterrupt:
    print('rl.run: interrupted before training started; rerun the same command to run it.',
          file=sys.stderr)
    sys.exit(130)


def exit_now():
  """Ends the process of a finished run: exit code 0, without the interpreter's teardown.

  By then the run has closed what it writes (metrics, TensorBoard, checkpoints,
  its log). The exit handlers still run and the streams are flushed; what is
  skipped is Python's finalisation of every module and object, which with jax
  and XLA loaded takes 0.3 to 0.5 s: a tenth of a CartPole run that a user
  waits for. Only for the command line: a caller of `main` keeps its process.
  """
  atexit._run_exitfuncs()  # pylint: disable=protected-access  (logging's flush among them)
  sys.stdout.flush()
  sys.stderr.flush()
  os._exit(0)


def main_then_exit(argv):
  main(argv)
  exit_now()


if __name__ == '__main__':
  app.run(main_then_exit, flags_parser=flags_parser('rl.run'))
