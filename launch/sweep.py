r"""Hyper-parameter and seed sweeps: grid points x seeds as `python -m rl.run` processes.

  python -m launch.sweep --config_file=configs/ppo_cartpole.gin \
      --sweep=configs/sweeps/ppo_cartpole_sweep.yaml --output_dir=runs/sweep1 \
      [--seeds=0,1,2] [--parallel=N] [--config 'binding' ...] [--allow_config_change] \
      [--compilation_cache_dir=D] \
      [--backend=local|ray [--ray_address=auto] [--ray_num_cpus=1] [--ray_num_gpus=0]]

The sweep file is YAML mapping gin binding names to lists of values, e.g.
`RLTask.gamma: [0.99, 0.95]`; the cartesian product of the lists times the
seeds of --seeds (rl.run's --seed is refused) gives the runs. Each run lives in
  <output_dir>/<name=value,name=value>/seed_<n>
(names sorted, unsafe characters replaced by '_'), with rl.run's stdout and
stderr appended to seed_<n>.log next to it (each invocation after a line with
its date and command), and <output_dir>/index.json lists every run with its
status ('pending' | 'finished' | 'failed' | 'interrupted') and, for failed
ones, the error line; 'log' names the run's log file, relative to <output_dir>.

JAX-native grid points: a grid point whose parsed config binds RLTask.env to
a JAX-native env ('gymnax:<id>', rl.envs.gymnax_envs) runs its seeds as ONE
  python -m rl.run --seeds=<a,b,...> --output_dir=<output_dir>/<point>
which trains them together (vmapped, one compiled call per epoch) and writes
the same <point>/seed_<n> folders; that process's output is appended to
<point>/seeds.log (rl.run prefixes each line with 'seed <n>: ') instead of to
seed_<n>.log. The config is read per point, so a grid over RLTask.env may mix
backends: gymnasium points keep one process per seed (rl.run would run their
seeds one after the other), which is how they use the cores. index.json still
lists one run per seed; when the point's process fails, every seed it ran is
'failed' with its error line (and 'interrupted' when it is cut short).
Seeds finished before are skipped as below; the point's other seeds run
together in one process, and a point whose seeds all finished starts none.
JAX-native points that differ only in float hyperparameters of
rl.grid.TRACEABLE run as ONE `python -m rl.run --grid=... --seeds=...` into the
sweep folder, which writes the same <point>/seed_<n> folders and appends to
grid_<the points' other bindings>.log there (launch.runner.grid_programs).
--parallel (and Ray's per-task --ray_num_cpus/--ray_num_gpus) count
processes: such a point takes one slot, one Ray task, for all its seeds.

Strings are passed to gin quoted (repr), except those starting with '@' or '%',
which are gin references and macros; lists become tuples. The sweep bindings
come after the --config ones. A failed run does not stop the others; the exit
status is 1 if any failed, 2 on bad input, 130 after Ctrl-C and 143 after
SIGTERM, which both stop its runs: each finishes its epoch and checkpoints it
(rl.termination), and a local run still going after a minute, or at a second
Ctrl-C, is killed (launch.backends.STOP_GRACE_S). Rerunning the same command resumes
unfinished runs from their checkpoints and skips the runs it finished before
(same config files, same parsed config, same --config bindings in any order
that cannot change them; otherwise each run is started and rl.run decides: a
finished run is a no-op there, a changed config an error unless
--allow_config_change, which every run then gets). The config is parsed with
every grid point's bindings before any run starts, so a typo fails the sweep
once, with exit status 2.

Backends (launch/backends.py): 'local' runs --parallel child processes here;
'ray' submits every process (a run, or a JAX-native point's seeds) as a Ray
task to a cluster, or to a local Ray instance when no --ray_address is given.
A rerun with every run finished before starts neither.

This module is the command line: flags, input checks, signals, exit status.
launch/config_check.py parses the config per grid point, launch/runner.py
runs the processes and keeps index.json current.
"""
import os
import sys

from absl import app
from absl import flags

from launch import backends
from launch.config_check import check_points
from launch.errors import SweepError
from launch.grid import SEED_BINDING
from launch.index import INDEX_FILE
from launch.index import finished_before
from launch.index import BINDING
from launch.grid import expand
from launch.grid import load_sweep
from launch.grid import parse_seeds
from launch.runner import Interrupted
from launch.runner import run_sweep
from rl import run as run_lib  # also defines the flags redefined below
from rl import termination

FLAGS = flags.FLAGS


def define_flags(flag_values):
  """Defines launch.sweep's flags on `flag_values` (absl's FLAGS, at import; see rl.run's).

  rl.run (imported for its flags parser) defines some of these names for one
  run. absl allows one flag per name in a process, so they are redefined with
  allow_override and their meaning in a sweep, which --help then shows.
  """
  define = dict(flag_values=flag_values)
  redefine = dict(define, allow_override=True)
  flags.DEFINE_multi_string('config_file', [], 'Gin config files every run starts from, '
                            'parsed in order (required).', **redefine)
  flags.DEFINE_multi_string('config', [], 'Gin bindings every run applies after the config '
                            "files, e.g. 'RLTask.max_steps = 10000'; the names the sweep file "
                            'or --seeds set are refused here.', **redefine)
  flags.DEFINE_string('output_dir', None, 'The sweep folder (required): every run in '
                      '<output_dir>/<grid point>/seed_<n>, its output appended to '
                      'seed_<n>.log (a JAX-native point\'s seeds, run by one process: to '
                      '<grid point>/seeds.log), and index.json listing the runs.',
                      **redefine)
  flags.DEFINE_bool('allow_config_change', False, 'Passed to every run: resume a run whose '
                    'config changed since it started (on purpose) instead of failing it.',
                    **redefine)
  flags.DEFINE_string('compilation_cache_dir', None, "Passed to every run: JAX's persistent "
                      "compilation cache folder the runs share; '' turns it off. Default: the "
                      "runs' own ($RL_COMPILATION_CACHE_DIR if set, else "
                      '~/.cache/rl/jax_compilation_cache).', **redefine)
  flags.DEFINE_integer('seed', None, "Refused: rl.run's single seed; a sweep runs every grid "
                       'point with each of --seeds.', **redefine)
  flags.DEFINE_string('sweep', None, 'YAML file mapping gin binding names to value lists '
                      '(required).', **define)
  # Overrides rl.run's --seeds (a string of seeds for one process); here a list.
  flags.DEFINE_list('seeds', ['0'], 'Seeds to run every grid point with, e.g. 0,1,2 (on a '
                    'JAX-native env, one rl.run per grid point trains them together).',
                    **redefine)
  flags.DEFINE_integer('parallel', None, 'rl.run processes at once (default: the number of '
                       "CPUs for 'local'; for 'ray', every one is submitted and Ray queues them). "
                       "A JAX-native grid point's seeds share one.", **define)
  flags.DEFINE_enum('backend', 'local', ['local', 'ray'], "Where runs execute: 'local' "
                    "(subprocesses on this machine) or 'ray' (a task each on a Ray cluster; "
                    "pip install '.[ray]').", **define)
  flags.DEFINE_string('ray_address', None, "The Ray cluster to join: 'auto' (the one started "
                      "on this node with 'ray start'), 'host:6379' or 'ray://host:10001' (Ray "
                      "Client, needs pip install 'ray[client]'). Unset: a new local Ray "
                      'instance (or $RAY_ADDRESS if set).', **define)
  flags.DEFINE_float('ray_num_cpus', 1.0, 'CPUs Ray reserves for each rl.run process (a run, '
                     "or a JAX-native grid point's seeds; rl.run runs single-threaded on the "
                     'CPU).', **define)
  flags.DEFINE_float('ray_num_gpus', 0.0, 'GPUs Ray reserves for each rl.run process (fractions '
                     'share one).', **define)


define_flags(FLAGS)


def _binding_name(binding):
  m = BINDING.match(binding)
  return m.group(1) if m else None


def check_flags():
  """Refuses the flags a sweep would accept and ignore, rather than ignore them.

  Those are rl.run's --seed and the flags of the modules imported here (orbax
  defines some); absl's own flags (help, logging, pdb, profiling) act on every
  absl program, this one too.
  """
  if FLAGS['seed'].present:
    raise SweepError(f"--seed is rl.run's single seed; a sweep runs every grid point with "
                     f'each of --seeds: pass --seeds={FLAGS.seed}.')
  this_module = FLAGS.find_module_defining_flag('sweep')
  for module, module_flags in FLAGS.flags_by_module_dict().items():
    if module == this_module or module.split('.')[0] == 'absl':
      continue
    for flag in module_flags:
      if flag.present:
        raise SweepError(f'--{flag.name} does nothing in a sweep (it is a flag of {module}); '
                         'drop it.')


def main(argv):
  if len(argv) > 1:
    print(f'launch.sweep: unexpected arguments {argv[1:]}; bindings go in --config.',
          file=sys.stderr)
    sys.exit(2)
  try:
    check_flags()
    if not FLAGS.config_file:
      raise SweepError('give --config_file, the gin config every run starts from.')
    for path in FLAGS.config_file:
      if not os.path.isfile(path):
        raise SweepError(f"config file '{path}' does not exist; check the --config_file path.")
    if not FLAGS.sweep or not FLAGS.output_dir:
      raise SweepError('give --sweep (the YAML grid) and --output_dir.')
    if FLAGS.parallel is not None and FLAGS.parallel < 1:
      raise SweepError(f'--parallel must be at least 1, not {FLAGS.parallel}.')
    if FLAGS.backend != 'ray':
      for name in ('ray_address', 'ray_num_cpus', 'ray_num_gpus'):
        if FLAGS[name].present:
          raise SweepError(f'--{name} applies only to --backend=ray.')
    sweep = load_sweep(FLAGS.sweep)
    # A --config binding the sweep also sets would be silently overridden.
    for binding in FLAGS.config:
      if _binding_name(binding) in sweep or _binding_name(binding) == SEED_BINDING:
        raise SweepError(f"--config '{binding}' binds a name the sweep or --seeds sets; "
                         'drop one of them.')
    seeds = parse_seeds(FLAGS.seeds)
    runs = expand(sweep, seeds)
    if os.path.exists(FLAGS.output_dir) and not os.path.isdir(FLAGS.output_dir):
      raise SweepError(f"output folder '{FLAGS.output_dir}' is a file; pass another "
                       '--output_dir.')
    digest, jax_points = check_points(FLAGS.config_file, FLAGS.config, runs)
    header = {'config_files': [os.path.abspath(p) for p in FLAGS.config_file],
              'config_digest': digest,
              'extra_config': FLAGS.config, 'sweep': os.path.abspath(FLAGS.sweep),
              'seeds': seeds, 'backend': FLAGS.backend}
    skipped = finished_before(FLAGS.output_dir, header, runs)
    parallel = FLAGS.parallel
    if parallel is None and FLAGS.backend == 'local':
      parallel = os.cpu_count() or 1
    # Last, as Ray takes seconds to start: all cheaper checks come first. Not at
    # all when every run finished before: there is nothing to run on it.
    backend = None
    if len(skipped) < len(runs):
      backend = backends.make_backend(FLAGS.backend, parallel, FLAGS.ray_address,
                                      FLAGS.ray_num_cpus, FLAGS.ray_num_gpus)
  except SweepError as e:
    print(f'launch.sweep: error: {e}', file=sys.stderr)
    sys.exit(2)
  index = os.path.join(FLAGS.output_dir, INDEX_FILE)
  # `kill` and cluster schedulers send SIGTERM: stop the runs as for Ctrl-C.
  termination.stop_on_sigterm()
  try:
    runs = run_sweep(runs, FLAGS.config_file, FLAGS.config, FLAGS.output_dir, backend,
                     parallel, header, skipped, FLAGS.allow_config_change,
                     FLAGS.compilation_cache_dir, together=jax_points)
  except Interrupted as e:
    print(f'[sweep] {termination.cause()}interrupted: {e}; rerun the same command to resume. '
          f'Index in {index}', flush=True)
    sys.exit(termination.exit_status())
  finally:
    if backend is not None:
      backend.close()
  failed = [r for r in runs if r['status'] == 'failed']
  print(f'[sweep] {len(runs) - len(failed)} of {len(runs)} runs finished, {len(failed)} '
        f'failed; index in {index}', flush=True)
  sys.exit(1 if failed else 0)


if __name__ == '__main__':
  app.run(main, flags_parser=run_lib.flags_parser('launch.sweep'))
