r"""Compares runs: `python -m rl.report RUNS_DIR [--target=475] [--metric=eval|train] ...`.

RUNS_DIR is one run folder (holding metrics.jsonl) or a folder with run
folders anywhere below it (a sweep's <point>/seed_<n>, a --seeds run's
seed_<n>, runs/ppo/seed_<n> beside runs/a2c/seed_<n>). Runs whose config.gin
differ only in RLTask.seed form a group, named by its folder where folders
tell the groups apart and by its differing bindings otherwise
(rl.run_groups). A run is finished when its last epoch is its
train_rl.n_epochs, or when that epoch's eval_return reached its
train_rl.stop_at_return; the others are unfinished: listed and drawn, but
left out of their group's aggregates. Training seconds leave out the epochs
that compiled (time_compile, logged by the first epoch of every start and
resume; without it, the first epoch), reported as compile seconds.
Writes, and prints the first of:
  <RUNS_DIR>/report.md             a summary table (a row per group: its
                                   finished runs' final and best return as
                                   an IQM or mean with a 95% bootstrap CI,
                                   rl.aggregate), then each group's bindings
                                   and a row per run;
  <RUNS_DIR>/learning_curves.png   a panel per env (rl.report_figure).
"""
import ast
import math
import os
import statistics
import sys

from absl import app
from absl import flags

from rl import aggregate
from rl import learning_curves as learning
from rl import report_figure
from rl.metrics import METRICS_FILE
from rl.metrics import TIMING_KEYS
from rl.metrics import read_metrics
from rl.run_groups import bindings_table
from rl.run_groups import env_name
from rl.run_groups import group_runs
from rl.run_groups import run_bindings

FLAGS = flags.FLAGS

# --metric: the record's key, and how the report calls it.
METRICS = {'eval': ('eval_return', 'eval return (greedy)'),
           'train': ('train_return', 'train return (episodes ended in the epoch)')}
X_AXES = {'env_steps': 'env steps', 'seconds': 'training seconds (compiling left out)'}


def define_flags(flag_values):
  """Defines rl.report's flags on `flag_values` (absl's FLAGS, at import; see rl.run's)."""
  flags.DEFINE_float('target', None, 'Return to reach (of --metric): adds the runs reaching '
                     'it and the median env steps and seconds to the first epoch at or above it.',
                     flag_values=flag_values)
  flags.DEFINE_enum('metric', 'eval', list(METRICS), 'The return compared: eval (eval_return, '
                    'greedy) or train (train_return, the episodes that ended in the epoch).',
                    flag_values=flag_values)
  flags.DEFINE_enum('x', 'env_steps', list(X_AXES), "The plot's x axis: env steps or "
                    'training seconds.', flag_values=flag_values)
  flags.DEFINE_enum('aggregate', 'iqm', list(aggregate.AGGREGATES), "Over a group's runs: "
                    'iqm (interquartile mean) or mean, with a 95% bootstrap CI.',
                    flag_values=flag_values)


define_flags(FLAGS)

REPORT_FILE = 'report.md'
PLOT_FILE = 'learning_curves.png'


def find_runs(runs_dir):
  """Run folders: `runs_dir` itself, or every folder below it holding metrics.jsonl.

  In folder order, at any depth. A run folder's own subfolders (checkpoints,
  tensorboard) are not searched; links to folders are not followed.
  """
  found = []
  for folder, subfolders, files in os.walk(runs_dir):
    if METRICS_FILE in files:
      found.append(folder)
      subfolders.clear()
    else:
      subfolders.sort()
  return found


def _binding_value(bindings, key):
  """The Python value of a binding (None when it is missing or not a literal)."""
  try:
    return ast.literal_eval(bindings[key])
  except (KeyError, ValueError, SyntaxError):
    return None


def unfinished_epochs(run_dir, records):
  """'epoch E of N' for a run that has not finished, None for a finished one.

  rl.run marks no run as done, so the config.gin it writes at every start
  decides: a run is finished when its last epoch is train_rl.n_epochs, or
  when that epoch's eval_return reached train_rl.stop_at_return (the trainer
  stops after such an epoch, and started again runs no more). A run without
  train_rl.n_epochs (no config.gin) counts as finished: nothing says otherwise.
  A run without a single epoch is never finished.
  """
  if not records:
    return 'no epoch trained'  # e.g. a folder set up with train_rl.n_epochs = 0
  bindings = run_bindings(run_dir)
  n_epochs = _binding_value(bindings, 'train_rl.n_epochs')
  stop_at = _binding_value(bindings, 'train_rl.stop_at_return')
  last = max(records, key=lambda r: r['epoch'], default={'epoch': 0})
  value = learning.finite(last.get('eval_return'))
  if (n_epochs is None or last['epoch'] >= n_epochs
      or (stop_at is not None and value is not None and value >= stop_at)):
    return None
  return f"epoch {last['epoch']} of {n_epochs}"


def split_compile(records):
  """(compile seconds, `records` with no seconds in the epochs that compiled).

  The epochs that jit-compile take far longer than the rest: those logging
  time_compile (their seconds) where rl.run logs it, else the first. Leaving
  them out of training seconds and seconds to target compares the runs'
  training, not their compilation.
  """
  # Truthy, not just present: a time_compile of 0 (or null) compiled nothing.
  compiled = [r for r in records if learning.finite(r.get('time_compile'))]
  if compiled:
    seconds = sum(learning.finite(r['time_compile']) for r in compiled)
  else:
    compiled = [min(records, key=lambda r: r['epoch'])] if records else []
    seconds = sum(map(learning.epoch_seconds, compiled))
  compiled = {id(r) for r in compiled}
  timed = [{k: v for k, v in r.items() if k not in TIMING_KEYS} if id(r) in compiled else r
           for r in records]
  return seconds, timed


def run_curve(timed, key, x):
  """(x, returns) of the epochs with a finite `key`; x is env steps or training seconds.

  `timed`: records as `split_compile` leaves them, so compiling adds no seconds.
  """
  xs, ys, seconds = [], [], 0.0
  for record in sorted(timed, key=lambda r: r['epoch']):
    seconds += learning.epoch_seconds(record)
    value = learning.finite(record.get(key))
    if value is not None:
      xs.append(record['env_steps'] if x == 'env_steps' else seconds)
      ys.append(value)
  return xs, ys


def summarize_run(records, key='eval_return', target=None, x='env_steps'):
  """One run's numbers: final and best `key`, seconds, where it reached `target`, its curve."""
  compile_seconds, timed = split_compile(records)
  _, values = learning.eval_curve(records, key)
  # No env-step budget applies here: any epoch reaching the target counts.
  reach = learning.time_to_target(timed, math.inf if target is None else target, math.inf, key)
  return {'final': learning.final_eval(records, key), 'best': max(values, default=None),
          'steps_to_target': reach['env_steps'], 'seconds_to_target': reach['wall_seconds'],
          'train_seconds': sum(map(learning.epoch_seconds, timed)),
          'compile_seconds': compile_seconds, 'curve': run_curve(timed, key, x)}


def summarize_group(runs, how='iqm'):
  """A group's row from its finished runs' `summarize_run`s.

  final and best: rl.aggregate Estimates (None without a value); n_reached and
  the medians of env steps and seconds over the runs reaching the target; the
  mean over runs of training and compile seconds.
  """
  reached = [r for r in runs if r['steps_to_target'] is not None]

  def over(average, members, key):
    return average(r[key] for r in members) if members else None

  return {'final': aggregate.estimate([r['final'] for r in runs], how),
          'best': aggregate.estimate([r['best'] for r in runs], how),
          'n_runs': len(runs), 'n_reached': len(reached),
          'median_steps': over(statistics.median, reached, 'steps_to_target'),
          'median_seconds': over(statistics.median, reached, 'seconds_to_target'),
          'train_seconds': over(statistics.fmean, runs, 'train_seconds'),
          'compile_seconds': over(statistics.fmean, runs, 'compile_seconds')}


def _fmt(value, digits=1):
  return '—' if value is None else f'{value:,.{digits}f}'


def format_estimate(estimate, n_runs):
  """'485.0 [480.0, 490.0]', or '485.0 (2 runs, no CI)' below MIN_RUNS_FOR_CI runs."""
  if estimate is None:
    return '—'
  text = f'{estimate.value:.1f}'
  if estimate.low is not None:
    text += f' [{estimate.low:.1f}, {estimate.high:.1f}]'
  else:
    text += f' ({estimate.n} run{"s" * (estimate.n != 1)}, no CI)'
  if estimate.n != n_runs:
    text += f' (of {n_runs} runs)'  # some finished run logged no value
  return text


def _table(header, rows):
  return ['| ' + ' | '.join(header) + ' |', '|' + '---|' * len(header)] + [
      '| ' + ' | '.join(row) + ' |' for row in rows]


def _groups(by_env):
  """(env, name, run rows) of each group of {env: [(name, table, run rows)]}, env by env."""
  return [(env, name, rows) for env, groups in by_env.items() for name, _, rows in groups]


def _finished(run_rows):
  """The `summarize_run`s of the finished runs among (run name, status, summary) rows."""
  return [run for _, status, run in run_rows if status == 'finished']


def summary_table(by_env, metric_name, how, target=None):
  """The markdown summary: a row per group of {env: [(name, table, run rows)]}."""
  label = aggregate.LABELS[how]
  header = ['group', 'env', 'runs (finished/total)', f'final {metric_name}, {label} [95% CI]',
            f'best {metric_name}, {label} [95% CI]']
  if target is not None:
    header += [f'env steps to {target:g} (median, runs reaching)', f'seconds to {target:g}']
  header += ['training seconds', 'compile seconds']
  rows = []
  for env, name, run_rows in _groups(by_env):
    row = summarize_group(_finished(run_rows), how)
    cells = [name, env, f"{row['n_runs']}/{len(run_rows)}",
             format_estimate(row['final'], row['n_runs']),
             format_estimate(row['best'], row['n_runs'])]
    if target is not None:
      cells += [f"{_fmt(row['median_steps'], 0)} ({row['n_reached']}/{row['n_runs']})",
                _fmt(row['median_seconds'])]
    cells += [_fmt(row['train_seconds']), _fmt(row['compile_seconds'])]
    rows.append(cells)
  return _table(header, rows)


def group_section(name, table, run_rows, metric_name, target=None):
  """A group's markdown section: heading, its differing bindings, a row per run.

  run_rows: [(run name, 'finished' or 'unfinished: epoch E of N', summarize_run)].
  """
  header = ['run', 'status', f'final {metric_name}', f'best {metric_name}']
  if target is not None:
    header += [f'env steps to {target:g}', f'seconds to {target:g}']
  header += ['training seconds', 'compile seconds']
  rows = []
  for run_name, status, run in run_rows:
    cells = [run_name, status, _fmt(run['final']), _fmt(run['best'])]
    if target is not None:
      cells += [_fmt(run['steps_to_target'], 0), _fmt(run['seconds_to_target'])]
    rows.append(cells + [_fmt(run['train_seconds']), _fmt(run['compile_seconds'])])
  return '\n'.join([f'## {name}', ''] + bindings_table(table or {}) + _table(header, rows))


def report_note(metric_key, how, target=None):
  """How the report's numbers are counted, for its last paragraph."""
  note = (f'Final: each run\'s last finite {metric_key}; best: its highest. A group\'s '
          f'{aggregate.LABELS[how]} and its 95% percentile bootstrap CI ({aggregate.REPS:,} '
          f'resamples of the runs, seed {aggregate.SEED}) are over its finished runs; with '
          f'fewer than {aggregate.MIN_RUNS_FOR_CI} there is no CI. A run is finished when its '
          'last epoch is its train_rl.n_epochs or its eval_return reached '
          'train_rl.stop_at_return. Seconds: the epochs\' time_collect + time_train + '
          'time_eval, without the epochs that compiled (time_compile where logged, else the '
          'first epoch), whose seconds are the compile seconds; a group\'s are the mean over '
          'its finished runs.')
  if target is not None:
    note += (f' To target: the first epoch whose {metric_key} >= {target:g}; medians over '
             'the finished runs reaching it.')
  return note


def make_report(runs_dir, target=None, metric='eval', x='env_steps', how='iqm'):
  """Writes report.md and learning_curves.png into `runs_dir`; returns the markdown.

  Raises:
    ValueError: `runs_dir` is missing or holds no run.
  """
  if not os.path.isdir(runs_dir):
    raise ValueError(f"'{runs_dir}' is not a folder; pass a run folder or a folder of runs.")
  run_dirs = find_runs(runs_dir)
  if not run_dirs:
    raise ValueError(f"no {METRICS_FILE} in '{runs_dir}' or any folder below it; pass a run "
                     'folder or a folder of runs.')
  key, metric_name = METRICS[metric]  # the tables name it by its key, the plot in words
  default_name = os.path.basename(os.path.abspath(runs_dir))
  by_env = {}  # env: [(name, table, [(run name, status, summary)])], groups in folder order
  for name, table, group in group_runs(run_dirs, runs_dir):
    run_rows = []
    for run_dir in group:
      records = read_metrics(run_dir)
      # A lone run folder given as RUNS_DIR is named by itself, not '.'.
      run_name = os.path.relpath(run_dir, runs_dir) if run_dir != runs_dir else default_name
      progress = unfinished_epochs(run_dir, records)
      status = 'finished' if progress is None else f'unfinished: {progress}'
      run_rows.append((run_name, status, summarize_run(records, key, target, x)))
    by_env.setdefault(env_name(run_bindings(group[0])), []).append((name, table, run_rows))
  sections = [group_section(name, table, rows, key, target)
              for env_groups in by_env.values() for name, table, rows in env_groups]
  text = '\n\n'.join([f'# Report: {default_name}',
                      '\n'.join(summary_table(by_env, key, how, target)),
                      *sections, report_note(key, how, target)]) + '\n'
  with open(os.path.join(runs_dir, REPORT_FILE), 'w') as f:
    f.write(text)
  panels = []
  for env, env_groups in by_env.items():
    panels.append((env, [report_figure.GroupCurves(
        name, [run['curve'] for run in _finished(rows)],
        [run['curve'] for _, status, run in rows if status != 'finished'])
                         for name, _, rows in env_groups]))
  try:
    report_figure.plot(panels, os.path.join(runs_dir, PLOT_FILE), how=how, target=target,
                       x_label=X_AXES[x], y_label=metric_name)
  except ImportError as e:
    if not (e.name or '').startswith('matplotlib'):
      raise
    # The table is the report; the plot is what the optional plots extra adds. A plot
    # of an earlier report would pass for this one's: it goes.
    stale = os.path.join(runs_dir, PLOT_FILE)
    removed = os.path.exists(stale)
    if removed:
      os.remove(stale)
    print(f"rl.report: warning: {PLOT_FILE} not drawn"
          f"{' (the earlier one removed)' if removed else ''}: matplotlib is not installed; "
          "pip install '.[plots]' adds it.", file=sys.stderr)
  return text


def parse_flags(argv):
  """absl's flag parsing, a bad flag said in one line with exit status 2 (as rl.run's)."""
  try:
    return FLAGS(argv)
  except flags.Error as e:
    print(f"rl.report: error: {' '.join(str(e).split())} (rl.report --helpshort lists the "
          'flags).', file=sys.stderr)
    sys.exit(2)


def main(argv):
  if len(argv) != 2:
    print('rl.report: error: give one RUNS_DIR, e.g. python -m rl.report runs/ppo',
          file=sys.stderr)
    sys.exit(2)
  try:
    text = make_report(argv[1], FLAGS.target, FLAGS.metric, FLAGS.x, FLAGS.aggregate)
  except (ValueError, OSError) as e:
    print(f'rl.report: error: {e}', file=sys.stderr)
    sys.exit(2)
  print(text, end='')


if __name__ == '__main__':
  app.run(main, flags_parser=parse_flags)
