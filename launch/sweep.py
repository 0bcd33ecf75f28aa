r"""Hyper-parameter and seed sweeps: every grid point x seed as its own `python -m rl.run`.

  python -m launch.sweep --config_file=configs/ppo_cartpole.gin \
      --sweep=configs/sweeps/ppo_cartpole_sweep.yaml --output_dir=runs/sweep1 \
      [--seeds=0,1,2] [--parallel=N] [--config 'binding' ...]

The sweep file is YAML mapping gin binding names to lists of values, e.g.
`RLTask.gamma: [0.99, 0.95]`; the cartesian product of the lists times the
seeds gives the runs. Each run lives in
  <output_dir>/<name=value,name=value>/seed_<n>
(names sorted, unsafe characters replaced by '_'), with rl.run's stderr in
seed_<n>.log next to it, and <output_dir>/index.json lists every run with its
status ('finished' | 'failed' | 'pending') and, for failed ones, the error line.

Strings are passed to gin quoted (repr), except those starting with '@' or '%',
which are gin references and macros; lists become tuples. The sweep bindings
come after the --config ones. A failed run does not stop the others; the exit
status is 1 if any failed, 2 on bad input. Rerunning the same command resumes
unfinished runs and leaves finished ones as they are (rl.run makes a finished
run a no-op).
"""
import concurrent.futures
import hashlib
import itertools
import json
import os
import re
import subprocess
import sys
import threading
import time

from absl import app
from absl import flags
import yaml

from launch.processes import REPO_ROOT
from launch.processes import child_env
from launch.processes import rl_run_command
from rl import run as _rl_run  # pylint: disable=unused-import  # defines the shared flags

FLAGS = flags.FLAGS
# --config_file, --config and --output_dir are rl.run's flags (absl allows one
# definition per name in a process, and tests import both); here they mean the
# config files and bindings of every run and the sweep's folder.
flags.DEFINE_string('sweep', None, 'YAML file mapping gin binding names to value lists.')
flags.DEFINE_list('seeds', ['0'], 'Seeds to run every grid point with.')
flags.DEFINE_integer('parallel', None, 'Runs at once (default: the number of CPUs).')
flags.DEFINE_string('backend', 'local', "Where runs execute; only 'local' (subprocesses "
                    'on this machine) exists so far.')

INDEX_FILE = 'index.json'
SEED_BINDING = 'RLTask.seed'
# Characters kept in folder names; the rest become '_' so names are safe in
# shells and on every filesystem.
_UNSAFE = re.compile(r'[^A-Za-z0-9._+-]')
# Filesystems cap a name at 255 bytes; longer grid-point names are cut and
# keep a hash of the full name so they stay distinct.
MAX_NAME = 200


class SweepError(Exception):
  """Bad input to the sweep; reported as one line, exit status 2."""


# -- the grid -----------------------------------------------------------------------


def _check_value(name, value):
  if isinstance(value, (list, tuple)):
    for item in value:
      _check_value(name, item)
  elif not isinstance(value, (str, int, float, bool, type(None))):
    raise SweepError(f"sweep value {value!r} of '{name}' is not a number, string, bool, "
                     'null or list of those.')


def validate_sweep(sweep):
  """Checks a {binding name: [values]} dict; returns it with keys sorted."""
  if not isinstance(sweep, dict) or not sweep:
    raise SweepError('the sweep must map gin binding names to lists of values, e.g. '
                     "'RLTask.gamma: [0.99, 0.95]'.")
  for name, values in sweep.items():
    if not isinstance(name, str) or not re.fullmatch(r'[\w./]+\.\w+', name):
      raise SweepError(f"sweep key {name!r} is not a gin binding name like 'RLTask.gamma'.")
    if name == SEED_BINDING:
      raise SweepError(f'sweep seeds with --seeds, not {SEED_BINDING}.')
    if not isinstance(values, list) or not values:
      raise SweepError(f"sweep values of '{name}' must be a non-empty list, e.g. "
                       f"'{name}: [a, b]'.")
    for value in values:
      _check_value(name, value)
  # Sorted so the folder names do not depend on the order of the YAML file.
  return {name: sweep[name] for name in sorted(sweep)}


class _Loader(yaml.SafeLoader):
  """PyYAML follows YAML 1.1, which reads 1e-3 as a string; learning rates need floats."""


_Loader.add_implicit_resolver(
    'tag:yaml.org,2002:float',
    re.compile(r'^[-+]?(?:[0-9][0-9_]*)(?:\.[0-9_]*)?[eE][-+]?[0-9]+$'),
    list('-+0123456789'))


def load_sweep(path):
  try:
    with open(path) as f:
      sweep = yaml.load(f, Loader=_Loader)  # safe: _Loader is a SafeLoader
  except OSError as e:
    raise SweepError(f"cannot read sweep file '{path}' ({e.strerror}).") from None
  except yaml.YAMLError as e:
    raise SweepError(f"sweep file '{path}' is not valid YAML: "
                     f"{' '.join(str(e).split())[:200]}") from None
  try:
    return validate_sweep(sweep)
  except SweepError as e:
    raise SweepError(f"sweep file '{path}': {e}") from None


def gin_value(value):
  """`value` as gin source text: strings quoted, numbers as is, lists as tuples."""
  if isinstance(value, str) and value[:1] in ('@', '%'):
    return value  # a reference or macro would stop being one inside quotes
  if isinstance(value, (list, tuple)):
    return '(' + ''.join(gin_value(v) + ', ' for v in value).rstrip(' ') + ')'
  return repr(value)


def _name_text(value):
  """The readable text of a value in a folder name: strings without their quotes."""
  if isinstance(value, (list, tuple)):
    return 'x'.join(_name_text(v) for v in value)
  return value if isinstance(value, str) else repr(value)


def point_name(bindings):
  """The folder name of one grid point, e.g. 'RLTask.gamma=0.95,RLTask.n_envs=4'."""
  name = ','.join(f'{_UNSAFE.sub("_", k)}={_UNSAFE.sub("_", _name_text(v))}'
                  for k, v in sorted(bindings.items()))
  if len(name) > MAX_NAME:
    digest = hashlib.sha256(name.encode()).hexdigest()[:12]
    name = f'{name[:MAX_NAME - 13]}~{digest}'
  return name


def expand(sweep, seeds):
  """Every grid point x seed, in a fixed order, as dicts: folder, bindings, seed.

  Raises SweepError if two runs would share a folder (values that differ only
  in characters the folder name replaces).
  """
  sweep = validate_sweep(sweep)
  runs = []
  for values in itertools.product(*sweep.values()):
    bindings = dict(zip(sweep, values))
    for seed in seeds:
      runs.append({'folder': f'{point_name(bindings)}/seed_{seed}', 'bindings': bindings,
                   'seed': seed})
  seen = {}
  for run in runs:
    other = seen.setdefault(run['folder'], run)
    if other is not run:
      raise SweepError(f"sweep values {other['bindings']} and {run['bindings']} map to the "
                       f"same folder '{run['folder']}'; make them differ in letters or digits.")
  return runs


def gin_bindings(bindings):
  return [f'{name} = {gin_value(value)}' for name, value in bindings.items()]


def parse_seeds(texts):
  try:
    seeds = [int(t) for t in texts]
  except ValueError:
    raise SweepError(f'--seeds must be integers separated by commas, not {texts}.') from None
  if not seeds or len(set(seeds)) != len(seeds):
    raise SweepError(f'--seeds must list at least one seed, each once, not {texts}.')
  return seeds


# -- running ------------------------------------------------------------------------


def run_command(run, config_files, extra_config, output_dir):
  # Sweep bindings last, so they win over a --config that binds the same name.
  return rl_run_command(config_files, os.path.join(output_dir, run['folder']), run['seed'],
                        list(extra_config) + gin_bindings(run['bindings']))


def _last_line(text):
  lines = [line.strip() for line in text.splitlines() if line.strip()]
  return lines[-1] if lines else ''


def run_one(run, config_files, extra_config, output_dir):
  """Runs one run to its end. Returns its error line, or None if it finished.

  stdout goes to <folder>.log (rl.run also keeps its own log.txt inside the
  folder); stderr is kept to report its last line, then appended to the log.
  """
  log_path = os.path.join(output_dir, run['folder'] + '.log')
  os.makedirs(os.path.dirname(log_path), exist_ok=True)
  with open(log_path, 'w') as log:
    try:
      process = subprocess.run(run_command(run, config_files, extra_config, output_dir),
                               stdout=log, stderr=subprocess.PIPE, text=True, errors='replace',
                               cwd=REPO_ROOT, env=child_env(), check=False)
    except OSError as e:  # the process could not even start
      return f'cannot start rl.run: {e}'
    log.write(process.stderr)
  if process.returncode == 0:
    return None
  return _last_line(process.stderr) or f'rl.run exited with status {process.returncode}'


def write_index(output_dir, header, runs):
  """Rewrites index.json whole, through a rename, so a reader never sees half a file."""
  path = os.path.join(output_dir, INDEX_FILE)
  with open(path + '.tmp', 'w') as f:
    json.dump(dict(header, runs=runs), f, indent=2)
    f.write('\n')
  os.replace(path + '.tmp', path)


def run_sweep(runs, config_files, extra_config, output_dir, parallel, header=None):
  """Runs every run, `parallel` at once, keeping index.json current.

  Returns the runs with 'status' (and 'error' for failed ones) filled in.
  """
  os.makedirs(output_dir, exist_ok=True)
  header = header or {}
  runs = [dict(run, status='pending') for run in runs]
  write_index(output_dir, header, runs)
  lock = threading.Lock()
  counts = {'running': 0}
  started = time.perf_counter()

  def progress(run, what):
    n_done = sum(r['status'] == 'finished' for r in runs)
    n_failed = sum(r['status'] == 'failed' for r in runs)
    print(f'[sweep] {n_done} done / {counts["running"]} running / {n_failed} failed of '
          f'{len(runs)} ({time.perf_counter() - started:.0f} s): {run["folder"]} {what}',
          flush=True)

  def work(run):
    with lock:
      counts['running'] += 1
      progress(run, 'started')
    error = run_one(run, config_files, extra_config, output_dir)
    with lock:
      counts['running'] -= 1
      if error is None:
        run['status'] = 'finished'
      else:
        run['status'], run['error'] = 'failed', error
      write_index(output_dir, header, runs)
      progress(run, 'finished' if error is None else f'FAILED: {error}')

  # Threads only wait on the child processes, so the GIL costs nothing here.
  with concurrent.futures.ThreadPoolExecutor(max_workers=parallel) as pool:
    for future in [pool.submit(work, run) for run in runs]:
      future.result()
  return runs


def _binding_name(binding):
  m = re.match(r'\s*([\w./]+)\s*=', binding)
  return m.group(1) if m else None


def main(argv):
  if len(argv) > 1:
    print(f'launch.sweep: unexpected arguments {argv[1:]}; bindings go in --config.',
          file=sys.stderr)
    sys.exit(2)
  try:
    if FLAGS.backend != 'local':
      raise SweepError(f"--backend={FLAGS.backend} is not available; only 'local' is "
                       "(a 'ray' backend is not built yet).")
    if not FLAGS.config_file:
      raise SweepError('give --config_file, the gin config every run starts from.')
    for path in FLAGS.config_file:
      if not os.path.isfile(path):
        raise SweepError(f"config file '{path}' does not exist; check the --config_file path.")
    if not FLAGS.sweep or not FLAGS.output_dir:
      raise SweepError('give --sweep (the YAML grid) and --output_dir.')
    parallel = FLAGS.parallel if FLAGS.parallel is not None else (os.cpu_count() or 1)
    if parallel < 1:
      raise SweepError(f'--parallel must be at least 1, not {parallel}.')
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
  except SweepError as e:
    print(f'launch.sweep: error: {e}', file=sys.stderr)
    sys.exit(2)
  header = {'config_files': FLAGS.config_file, 'sweep': FLAGS.sweep,
            'extra_config': FLAGS.config, 'seeds': seeds}
  runs = run_sweep(runs, FLAGS.config_file, FLAGS.config, FLAGS.output_dir, parallel, header)
  failed = [r for r in runs if r['status'] == 'failed']
  print(f'[sweep] {len(runs) - len(failed)} of {len(runs)} runs finished, {len(failed)} '
        f'failed; index in {os.path.join(FLAGS.output_dir, INDEX_FILE)}', flush=True)
  sys.exit(1 if failed else 0)


if __name__ == '__main__':
  app.run(main)
