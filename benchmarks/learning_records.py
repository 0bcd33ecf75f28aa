"""The learning benchmark's stored results: one JSON file per config in benchmarks/results/.

A record holds what benchmarks/learning.py measured for each (config, seed):
whether the run reached the config's target within its budget, the env steps
and wall seconds to it, the final eval, the whole eval curve, and the commit
(with a dirty flag) and UTC date of the measurement. docs/results.md is
rendered from these files (benchmarks/results_page.py), so the page states
what the records hold and nothing else.

A record of figures that were not measured by this script (long runs copied
from a hand-written page) says so in each seed's 'source'.
"""
import datetime
import json
import os
import subprocess

from rl.learning_curves import eval_curve
from rl.learning_curves import summarize_run

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RECORDS_DIR = os.path.join(REPO_ROOT, 'benchmarks', 'results')
MEASURED = 'run'  # 'source' of a seed that benchmarks/learning.py measured itself
STAMP_SUFFIX = '.measured.json'  # next to a run folder: the commit and date it started at


def git_stamp(repo_root=REPO_ROOT):
  """{'commit', 'dirty', 'date'} of the checkout now; commit and dirty are None outside git."""
  date = datetime.datetime.now(datetime.timezone.utc).strftime('%Y-%m-%dT%H:%M:%SZ')
  try:
    commit = subprocess.run(['git', '-C', repo_root, 'rev-parse', 'HEAD'], check=True,
                            capture_output=True, text=True).stdout.strip()
    status = subprocess.run(['git', '-C', repo_root, 'status', '--porcelain'], check=True,
                            capture_output=True, text=True).stdout
  except (OSError, subprocess.CalledProcessError):
    return {'commit': None, 'dirty': None, 'date': date}
  return {'commit': commit, 'dirty': bool(status.strip()), 'date': date}


def write_stamp(run_folder, stamp):
  """Keeps `stamp` next to a run folder, so a later re-read knows which code ran it."""
  with open(run_folder + STAMP_SUFFIX, 'w') as f:
    json.dump(stamp, f)


def read_stamp(run_folder):
  """The stamp of a run folder; unknown commit and date for a run made without one."""
  try:
    with open(run_folder + STAMP_SUFFIX) as f:
      return json.load(f)
  except (OSError, ValueError):
    return {'commit': None, 'dirty': None, 'date': None}


def seed_record(seed, metrics, target, budget, stamp):
  """One seed's entry from its run's metrics.jsonl records (None: the run failed)."""
  run = summarize_run(metrics, target, budget)
  steps, returns = eval_curve(metrics) if metrics is not None else ([], [])
  return {
      'seed': seed,
      'failed': metrics is None,
      'reached': run['reached'],
      'env_steps_to_target': run['env_steps'],
      'epoch_to_target': run['epoch'],
      'wall_seconds_to_target': (round(run['wall_seconds'], 3)
                                 if run['wall_seconds'] is not None else None),
      'final_eval': run['final'],
      'last_env_steps': run['last_env_steps'],
      'curve': {'env_steps': steps, 'eval_return': returns},
      'commit': stamp['commit'],
      'dirty': stamp['dirty'],
      'date': stamp['date'],
      'source': MEASURED,
  }


def config_record(config, target, budget, seeds, stop_at_target, extra_config, command):
  """A config's record: its target, budget, how it was run and its seed entries."""
  return {'config': config, 'target': target, 'budget': budget,
          'stop_at_target': stop_at_target, 'extra_config': list(extra_config),
          'commands': [command], 'notes': [], 'seeds': sorted(seeds, key=lambda s: s['seed'])}


def _settings(record):
  return (record['target'], record['budget'], record['stop_at_target'], record['extra_config'])


def record_path(records_dir, config):
  return os.path.join(records_dir, config + '.json')


def load(records_dir, config):
  """The stored record of `config`, or None."""
  try:
    with open(record_path(records_dir, config)) as f:
      return json.load(f)
  except FileNotFoundError:
    return None


def store(records_dir, record):
  """Writes `record`, merged into the stored one when both measure the same thing.

  A seed in `record` replaces its stored entry and other stored seeds
  stay; a stored record with another target, budget, stop rule or bindings
  measured something else and is replaced whole.
  """
  stored = load(records_dir, record['config'])
  if stored is not None and _settings(stored) == _settings(record):
    new = {s['seed'] for s in record['seeds']}
    seeds = [s for s in stored['seeds'] if s['seed'] not in new] + record['seeds']
    commands = stored['commands'] + [c for c in record['commands'] if c not in stored['commands']]
    record = {**stored, 'commands': commands, 'seeds': sorted(seeds, key=lambda s: s['seed'])}
  os.makedirs(records_dir, exist_ok=True)
  path = record_path(records_dir, record['config'])
  with open(path + '.tmp', 'w') as f:
    json.dump(record, f, indent=1)
    f.write('\n')
  os.replace(path + '.tmp', path)  # a crash mid-write leaves the stored record whole
  return record


class RecordError(Exception):
  """The stored records cannot make a page (none there, or one unreadable)."""


def load_all(records_dir):
  """Every stored record, by config name; RecordError when there is none or one is unreadable."""
  names = sorted(n for n in os.listdir(records_dir) if n.endswith('.json')) if os.path.isdir(
      records_dir) else []
  if not names:
    raise RecordError(f'no records (<config>.json) in {records_dir}; run benchmarks/learning.py '
                      'with --write_docs first, or pass --records_dir')
  records = []
  for name in names:
    path = os.path.join(records_dir, name)
    try:
      with open(path) as f:
        records.append(json.load(f))
    except (OSError, ValueError) as e:
      raise RecordError(f'cannot read the record {path} ({e}); restore it with '
                        f'`git checkout -- {path}` or measure it again') from e
  return records
