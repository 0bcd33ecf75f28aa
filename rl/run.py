r"""Trains an agent: `python -m rl.run --config_file=X.gin [--config 'A.b=1'] [--output_dir=D]`.

Config files are parsed in order, then the --config bindings, then --seed.
Bad input (the config, the env, the output folder) is reported in one line
before anything is written, with exit status 2; a run stopped by a
non-finite loss or a failed write (a full disk) exits with 1, Ctrl-C with
130 and SIGTERM with 143. Rerunning the same command on the same folder
resumes from its last checkpoint; so does `--output_dir=D` alone, from the
config the run saved in D. Compiled programs are kept in a compilation cache
(--compilation_cache_dir) that later runs start from.
"""
# Notes for maintainers (the docstring above is --helpshort's text):
# the first line (what runs, where) comes before JAX is imported, which is why
# this module imports rl.experiment only in `main`: a program that needs the gin
# names of every configurable imports rl.experiment itself. SIGTERM stops a run
# as Ctrl-C does (rl.termination); what the console shows afterwards, and how
# often, is rl.console's; the cache is rl/compilation_cache.py's.
import errno
import logging
import os
import re
import sys

from absl import app
from absl import flags
from absl import logging as absl_logging

from rl import console
from rl import run_folder
from rl import termination
from rl.errors import ConfigError
from rl.errors import Interrupted
from rl.errors import NonFiniteLossError
from rl.errors import UserError
from rl.errors import WriteFailed

FLAGS = flags.FLAGS
# The errors of a write that found no room: a full disk, a quota, `ulimit -f`.
DISK_FULL_ERRNOS = (errno.ENOSPC, errno.EDQUOT, errno.EFBIG)


def define_flags(flag_values):
  """Defines the command line's flags on `flag_values` (absl's FLAGS, at import).

  A fresh FlagValues holds them alone, for calling `main` in a process that
  also imports launch.sweep, whose --seeds of the same name is a list.
  """
  define = dict(flag_values=flag_values)
  flags.DEFINE_multi_string('config_file', [], 'Gin config files, parsed in order.', **define)
  flags.DEFINE_multi_string('config', [], 'Gin bindings applied after the files, e.g. '
                            "'RLTask.gamma = 0.95'.", **define)
  flags.DEFINE_string('output_dir', None, 'The run folder (default: runs/<stem of the '
                      'first config file>).', **define)
  flags.DEFINE_integer('seed', None, 'Overrides RLTask.seed (0 to 2**31 - 1).', **define)
  flags.DEFINE_string('seeds', None, "Several seeds, e.g. '0-7' or '0,3,5': one ordinary run "
                      'folder <output_dir>/seed_<n> each. On JAX-native envs (gymnax:) they '
                      'train together, vmapped in one compiled call per epoch; on gymnasium '
                      'envs one after the other.', **define)
  flags.DEFINE_multi_string('grid', [], "A grid of float hyperparameters and their values, "
                            "e.g. 'PPO.epsilon=[0.1, 0.2]' (repeat it for more): every cell "
                            'times every seed is an ordinary run folder <output_dir>/<cell>/'
                            'seed_<n>. On JAX-native envs (gymnax:) they train together in one '
                            'compiled program; on gymnasium envs one after the other '
                            '(docs/grids.md).', **define)
  flags.DEFINE_bool('verbose', False, 'Print every epoch\'s line (the same as --config '
                    "'console.verbose = True'); by default the console shows the first and "
                    'last epoch, every evaluating epoch and otherwise one line every '
                    'console.every_seconds (5 s). log.txt and metrics.jsonl keep every epoch.',
                    **define)
  flags.DEFINE_bool('allow_config_change', False, 'Resume a run whose config differs '
                    'from the one it was started with (on purpose).', **define)
  flags.DEFINE_string('compilation_cache_dir', None, "JAX's persistent compilation cache "
                      "folder; '', off or none turns the cache off. Default: "
                      '$RL_COMPILATION_CACHE_DIR if set (a folder, or off), else '
                      '$XDG_CACHE_HOME/rl/jax_compilation_cache '
                      '(~/.cache/rl/jax_compilation_cache).', **define)


define_flags(FLAGS)


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


def opening_line():
  """What this command runs and where, said before JAX is imported (seconds on a busy machine)."""
  output_dir = FLAGS.output_dir
  if output_dir is None and FLAGS.config_file:
    output_dir = run_folder.default_output_dir(FLAGS.config_file)
  n_bindings = len(FLAGS.config) + (FLAGS.seed is not None)
  return console.opening_line(FLAGS.config_file, n_bindings, output_dir, FLAGS.seeds,
                              FLAGS.grid)


def main(argv):
  if len(argv) > 1:
    print(f'rl.run: error: {stray_arguments(argv[1:])}', file=sys.stderr)
    sys.exit(2)
  if FLAGS.config_file or FLAGS.output_dir:
    print(opening_line(), flush=True)
  # pylint: disable=import-outside-toplevel
  from rl import compilation_cache  # these import JAX
  from rl import experiment
  experiment.mark_time('main')
  # orbax logs every checkpoint step at INFO through absl; the console is ours.
  absl_logging.set_verbosity(absl_logging.WARNING)
  bindings = FLAGS.config + (['console.verbose = True'] if FLAGS.verbose else [])
  # Before anything compiles: nothing is compiled at import time.
  compilation_cache.configure(FLAGS.compilation_cache_dir, 'rl.run')
  termination.stop_on_sigterm()
  try:
    if FLAGS.seeds is not None or FLAGS.grid:
      if FLAGS.seed is not None and FLAGS.seeds is not None:
        raise ConfigError('give --seed or --seeds, not both.')
      # pylint: disable=import-outside-toplevel
      from rl.grid import parse_grid
      from rl.seeds import parse_seeds
      grid = parse_grid(FLAGS.grid)
      seeds = (parse_seeds(FLAGS.seeds) if FLAGS.seeds is not None
               else None if FLAGS.seed is None else [FLAGS.seed])
      experiment.execute_seeds(FLAGS.config_file, bindings, FLAGS.output_dir, seeds,
                               FLAGS.allow_config_change, grid)
    else:
      experiment.execute(FLAGS.config_file, bindings, FLAGS.output_dir, FLAGS.seed,
                         FLAGS.allow_config_change)
  except UserError as e:
    print(f'rl.run: error: {e}', file=sys.stderr)
    sys.exit(2)
  except (NonFiniteLossError, WriteFailed) as e:
    print(f'rl.run: error: {e}', file=sys.stderr)
    sys.exit(1)
  except OSError as e:
    # A full disk, a quota or a file-size limit hit by a write outside the
    # epoch loop (the folder's config, lock or log when the run starts).
    if e.errno not in DISK_FULL_ERRNOS:
      raise
    print(f'rl.run: error: could not write {e.filename or "to the output folder"}: '
          f'{e.strerror}; free space and rerun the same command.', file=sys.stderr)
    sys.exit(1)
  except Interrupted as e:
    print(f'rl.run: {termination.cause()}{e}', file=sys.stderr)
    sys.exit(termination.exit_status())
  except KeyboardInterrupt:
    print(f'rl.run: {termination.cause()}interrupted before training started; rerun the same '
          'command to run it.', file=sys.stderr)
    sys.exit(termination.exit_status())


def exit_now():
  """Ends the process of a finished run with exit code 0, skipping the interpreter's teardown.

  By then the run has closed everything it writes; the log is flushed here. What
  is skipped is Python's finalisation of every module and object, which with jax
  loaded is a tenth of a short run's wall time (docs/performance.md). Only for
  the command line: a caller of `main` keeps its process.
  """
  logging.shutdown()
  sys.stdout.flush()
  sys.stderr.flush()
  os._exit(0)


def main_then_exit(argv):
  main(argv)
  exit_now()


if __name__ == '__main__':
  app.run(main_then_exit, flags_parser=flags_parser('rl.run'))
