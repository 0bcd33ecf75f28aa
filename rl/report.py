r"""Summarises finished runs: `python -m rl.report RUNS_DIR [--target=475]`.

RUNS_DIR is one run folder (holding metrics.jsonl) or a folder with run
folders anywhere below it (a sweep's <point>/seed_<n>, a --seeds run's
seed_<n>). Runs whose config.gin differ only in RLTask.seed form a group;
groups are keyed G1, G2, ... and named by the bindings whose values differ
between them, abbreviated to their parameter names, with a table of those
bindings in full under the heading (a lone group is named by RUNS_DIR). Only finished runs are summarised: a run is
finished when its last epoch is its train_rl.n_epochs, or when that epoch's
eval_return reached its train_rl.stop_at_return; the others are listed under
their group with the epoch they reached. Training seconds leave out the
epochs that compiled (time_compile, logged by the first epoch of every start
and resume; without it, the first epoch), reported as compile seconds.
Writes, and prints the first of:
  <RUNS_DIR>/report.md             a markdown table per group;
  <RUNS_DIR>/learning_curves.png   eval return against env steps: mean line
                                   and min-max band over seeds per group.
"""
import ast
import math
import os
import statistics
import sys

from absl import app
from absl import flags

from rl import learning_curves as learning
from rl.metrics import METRICS_FILE
from rl.metrics import TIMING_KEYS
from rl.metrics import read_metrics
from rl.run_groups import bindings_table
from rl.run_groups import group_runs
from rl.run_groups import run_bindings

FLAGS = flags.FLAGS


def define_flags(flag_values):
  """Defines rl.report's flags on `flag_values` (absl's FLAGS, at import; see rl.run's)."""
  flags.DEFINE_float('target', None, 'Eval return to reach: adds the runs reaching it and '
                     'the median env steps and seconds to the first eval at or above it.',
                     flag_values=flag_values)


define_flags(FLAGS)

REPORT_FILE = 'report.md'
PLOT_FILE = 'learning_curves.png'
# Legends name groups by their key alone once a name is longer than this.
LEGEND_NAME_CHARS = 30
# Group i is drawn in colour C(i % 10) with line style i // 10: 10 colours repeat.
LINE_STYLES = ('-', '--', ':', '-.')


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


def best_eval(records):
  """The highest finite eval_return of a run (None without one)."""
  _, returns = learning.eval_curve(records)
  return max(returns) if returns else None


def summarize_group(name, records_per_run, target=None):
  """One group's numbers from its runs' metrics records.

  Returns learning.summarize_config's row (n_runs, final_mean, final_std
  (population std over seeds), and with a target n_reached, median_steps and
  median_seconds to the first eval >= target) plus 'best' over all its runs
  and the mean over runs of 'train_seconds' and 'compile_seconds' (see
  `split_compile`; median_seconds leaves out compile seconds too).
  """
  compile_seconds, timed = zip(*map(split_compile, records_per_run))
  # No env-step budget applies here: any epoch reaching the target counts.
  runs = [learning.summarize_run(records, math.inf if target is None else target, math.inf)
          for records in timed]
  row = learning.summarize_config(name, target, None, runs)
  bests = [b for b in map(best_eval, records_per_run) if b is not None]
  row['best'] = max(bests) if bests else None
  row['train_seconds'] = statistics.fmean(
      sum(map(learning.epoch_seconds, records)) for records in timed)
  row['compile_seconds'] = statistics.fmean(compile_seconds)
  return row


def _fmt(value, digits=1):
  return '—' if value is None else f'{value:,.{digits}f}'


def format_group(heading, row, run_names, unfinished, target=None, table=None):
  """A group's markdown section: heading, its differing bindings, one-row table, its runs.

  Args:
    heading: the section's title.
    row: `summarize_group` of its finished runs (None when none finished).
    run_names: its finished runs' names.
    unfinished: 'name (epoch E of N)' of its other runs.
    target: adds the target columns when given.
    table: {binding: value} telling the group apart from the others.
  """
  lines = [f'## {heading}', ''] + bindings_table(table or {})
  left_out = 'Unfinished, left out: ' + ', '.join(unfinished)
  if row is None:
    return '\n'.join(lines + ['No finished run. ' + left_out])
  header = ['runs', 'final eval_return (mean ± std)', 'best eval_return',
            'training seconds (mean)', 'compile seconds (mean)']
  final = ('—' if row['final_mean'] is None
           else f"{row['final_mean']:.1f} ± {row['final_std']:.1f}")
  if row['final_mean'] is not None and row['n_final'] != row['n_runs']:
    # Say when the mean is over fewer runs than the group has.
    final += f" ({row['n_final']}/{row['n_runs']} runs)"
  cells = [str(row['n_runs']), final, _fmt(row['best']), _fmt(row['train_seconds']),
           _fmt(row['compile_seconds'])]
  if target is not None:
    header += [f'runs reaching {target:g}', 'median env steps to target',
               'median seconds to target']
    cells += [f"{row['n_reached']}/{row['n_runs']}", _fmt(row['median_steps'], 0),
              _fmt(row['median_seconds'])]
  lines += ['| ' + ' | '.join(header) + ' |',
            '|' + '---|' * len(header),
            '| ' + ' | '.join(cells) + ' |', '',
            'Runs: ' + ', '.join(run_names)]
  return '\n'.join(lines + ([left_out] if unfinished else []))


def curves_figure(groups, target=None):
  """Eval return against env steps on one axes, the legend to its right.

  Args:
    groups: [(legend label, [(env_steps, eval_returns) per run])]; group i is
      drawn in colour i % 10 and line style i // 10; one without runs is not
      drawn (and keeps the next groups' colours).
    target: drawn as a dashed line when given.

  Returns:
    The matplotlib figure; close it with plt.close.
  """
  import matplotlib  # pylint: disable=import-outside-toplevel
  matplotlib.use('Agg')  # files only: reports are made on machines without a display
  import matplotlib.pyplot as plt  # pylint: disable=import-outside-toplevel
  from matplotlib import ticker  # pylint: disable=import-outside-toplevel

  # Constrained layout makes room for a legend outside the axes, where it
  # covers no curve however many groups there are.
  fig, ax = plt.subplots(figsize=(9, 5), layout='constrained')
  for i, (label, curves) in enumerate(groups):
    style = {'color': f'C{i % 10}', 'linestyle': LINE_STYLES[i // 10 % len(LINE_STYLES)]}
    label = f'{label} ({len(curves)} runs)'
    # Mean and band only where every seed has evals; see aggregate_curves.
    grid, mean, low, high = learning.aggregate_curves(curves)
    if len(grid) > 1:
      ax.fill_between(grid, low, high, color=style['color'], alpha=0.2)
      ax.plot(grid, mean, linewidth=2, label=label, **style)
    else:
      # One common point (or none) draws no line: show the seeds' own curves.
      for j, (steps, returns) in enumerate(curves):
        ax.plot(steps, returns, marker='.', label=label if j == 0 else None, **style)
  if target is not None:
    ax.axhline(target, color='gray', linestyle='--', label=f'target {target:g}')
  ax.set_xlabel('env steps')
  ax.xaxis.set_major_formatter(ticker.FuncFormatter(learning.steps_label))
  ax.set_ylabel('eval return (greedy)')
  ax.set_title('eval return: mean and min–max over seeds')
  ax.grid(alpha=0.3)
  if ax.get_legend_handles_labels()[0]:
    ax.legend(loc='upper left', bbox_to_anchor=(1.01, 1), fontsize='small',
              ncols=1 + len(groups) // 25)  # taller than the axes past ~25 entries
  return fig


def plot_groups(groups, path, target=None):
  """Writes `curves_figure(groups, target)` to the PNG `path`."""
  import matplotlib.pyplot as plt  # pylint: disable=import-outside-toplevel
  fig = curves_figure(groups, target)
  fig.savefig(path, dpi=100)
  plt.close(fig)


def group_labels(names):
  """(heading, legend label) per group name: 'G1: name' and 'G1', ...

  A lone group is called by its name. The legend shows the names too when
  they are all short: long ones that begin alike are unreadable there, and
  the report's headings say which key is which.
  """
  if len(names) == 1:
    return [(names[0], names[0])]
  keys = [f'G{i}' for i in range(1, len(names) + 1)]
  headings = [f'{key}: {name}' for key, name in zip(keys, names)]
  short = all(len(name) <= LEGEND_NAME_CHARS for name in names)
  return list(zip(headings, headings if short else keys))


def make_report(runs_dir, target=None):
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
  default_name = os.path.basename(os.path.abspath(runs_dir))
  groups = group_runs(run_dirs, default_name)
  labels = group_labels([name for name, _, _ in groups])
  sections, curves = [], []
  for (name, table, group), (heading, label) in zip(groups, labels):
    finished, unfinished = [], []
    for run_dir in group:
      records = read_metrics(run_dir)
      # A lone run folder given as RUNS_DIR is named by itself, not '.'.
      run_name = os.path.relpath(run_dir, runs_dir) if run_dir != runs_dir else default_name
      progress = unfinished_epochs(run_dir, records)
      if progress is None:
        finished.append((run_name, records))
      else:
        unfinished.append(f'{run_name} ({progress})')
    records_per_run = [records for _, records in finished]
    row = summarize_group(name, records_per_run, target) if finished else None
    sections.append(format_group(heading, row, [n for n, _ in finished], unfinished, target,
                                 table))
    curves.append((label, [learning.eval_curve(records) for records in records_per_run]))
  note = ('Only finished runs are summarised: a run is finished when its last epoch is its '
          'train_rl.n_epochs or its eval_return reached train_rl.stop_at_return. '
          'Final eval_return: each run\'s last finite eval_return; mean ± population std '
          'over the runs. Seconds: the epochs\' time_collect + time_train + time_eval, '
          'without the epochs that compiled (time_compile where logged, else the first '
          'epoch), whose seconds are the compile seconds.')
  if target is not None:
    note += (' Medians are over the runs reaching the target, seconds up to the first '
             'eval >= target.')
  text = f'# Report: {default_name}\n\n' + '\n\n'.join(sections) + '\n\n' + note + '\n'
  with open(os.path.join(runs_dir, REPORT_FILE), 'w') as f:
    f.write(text)
  try:
    plot_groups(curves, os.path.join(runs_dir, PLOT_FILE), target)
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


def main(argv):
  if len(argv) != 2:
    print('rl.report: error: give one RUNS_DIR, e.g. python -m rl.report runs/ppo',
          file=sys.stderr)
    sys.exit(2)
  try:
    text = make_report(argv[1], FLAGS.target)
  except (ValueError, OSError) as e:
    print(f'rl.report: error: {e}', file=sys.stderr)
    sys.exit(2)
  print(text, end='')


if __name__ == '__main__':
  app.run(main)
