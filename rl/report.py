r"""Summarises finished runs: `python -m rl.report RUNS_DIR [--target=475]`.

RUNS_DIR is one run folder (holding metrics.jsonl) or a folder whose
subfolders, up to 3 levels down, are run folders. Runs whose config.gin
differ only in RLTask.seed form a group; each group is named by the bindings
that differ between groups (or by RUNS_DIR's name when there is one group).
Writes, and prints the first of:
  <RUNS_DIR>/report.md             a markdown table per group;
  <RUNS_DIR>/learning_curves.png   eval return against env steps: mean line
                                   and min-max band over seeds per group.
"""
import math
import os
import sys

from absl import app
from absl import flags

from rl import learning_curves as learning
from rl.metrics import METRICS_FILE
from rl.metrics import read_metrics
from rl.run import CONFIG_FILE
from rl.run import config_bindings

FLAGS = flags.FLAGS
flags.DEFINE_float('target', None, 'Eval return to reach: adds the runs reaching it and '
                   'the median env steps and seconds to the first eval at or above it.')

MAX_DEPTH = 3
SEED_BINDING = 'RLTask.seed'
REPORT_FILE = 'report.md'
PLOT_FILE = 'learning_curves.png'




def find_runs(runs_dir):
  """Sorted run folders: `runs_dir` itself, or its subfolders up to MAX_DEPTH down.

  A run folder's own subfolders (checkpoints, tensorboard) are not searched.
  """
  if os.path.isfile(os.path.join(runs_dir, METRICS_FILE)):
    return [runs_dir]
  found = []

  def walk(folder, depth):
    for name in sorted(os.listdir(folder)):
      path = os.path.join(folder, name)
      if not os.path.isdir(path):
        continue
      if os.path.isfile(os.path.join(path, METRICS_FILE)):
        found.append(path)
      elif depth < MAX_DEPTH:
        walk(path, depth + 1)

  walk(runs_dir, 1)
  return found


def run_bindings(run_dir):
  """The run's config bindings without its seed ({} when config.gin is missing)."""
  path = os.path.join(run_dir, CONFIG_FILE)
  if not os.path.isfile(path):
    return {}
  with open(path) as f:
    bindings = config_bindings(f.read())
  bindings.pop(SEED_BINDING, None)
  return bindings


def group_runs(run_dirs, default_name):
  """[(name, [run_dir, ...])] of runs whose bindings are equal but for the seed.

  Groups keep the order of their first run. The name lists the bindings whose
  values are not the same in every group ('k=v, k2=v2'), so that two groups
  never share a name; a lone group is called `default_name`.
  """
  groups = {}
  for run_dir in run_dirs:
    bindings = run_bindings(run_dir)
    groups.setdefault(tuple(sorted(bindings.items())), (bindings, []))[1].append(run_dir)
  if len(groups) == 1:
    return [(default_name, next(iter(groups.values()))[1])]
  all_bindings = [bindings for bindings, _ in groups.values()]
  keys = sorted(set().union(*all_bindings))
  differing = [k for k in keys if len({b.get(k, '(unset)') for b in all_bindings}) > 1]
  return [(', '.join(f"{k}={bindings.get(k, '(unset)')}" for k in differing), runs)
          for bindings, runs in groups.values()]


def best_eval(records):
  """The highest finite eval_return of a run (None without one)."""
  _, returns = learning.eval_curve(records)
  return max(returns) if returns else None


def summarize_group(name, records_per_run, target=None):
  """One group's numbers from its runs' metrics records.

  Returns learning.summarize_config's row (n_runs, final_mean, final_std
  (population std over seeds), and with a target n_reached, median_steps and
  median_seconds to the first eval >= target) plus 'best' over all its runs.
  """
  # No env-step budget applies here: any epoch reaching the target counts.
  runs = [learning.summarize_run(records, math.inf if target is None else target, math.inf)
          for records in records_per_run]
  row = learning.summarize_config(name, target, None, runs)
  bests = [b for b in map(best_eval, records_per_run) if b is not None]
  row['best'] = max(bests) if bests else None
  return row


def _fmt(value, digits=1):
  return '—' if value is None else f'{value:,.{digits}f}'


def format_group(row, run_names, target=None):
  """A group's markdown section: heading, one-row table, its runs."""
  header = ['runs', 'final eval_return (mean ± std)', 'best eval_return']
  final = ('—' if row['final_mean'] is None
           else f"{row['final_mean']:.1f} ± {row['final_std']:.1f}")
  if row['final_mean'] is not None and row['n_final'] != row['n_runs']:
    # Say when the mean is over fewer runs than the group has.
    final += f" ({row['n_final']}/{row['n_runs']} runs)"
  cells = [str(row['n_runs']), final, _fmt(row['best'])]
  if target is not None:
    header += [f'runs reaching {target:g}', 'median env steps to target',
               'median seconds to target']
    cells += [f"{row['n_reached']}/{row['n_runs']}", _fmt(row['median_steps'], 0),
              _fmt(row['median_seconds'])]
  return '\n'.join([f"## {row['config']}", '',
                    '| ' + ' | '.join(header) + ' |',
                    '|' + '---|' * len(header),
                    '| ' + ' | '.join(cells) + ' |', '',
                    'Runs: ' + ', '.join(run_names)])


def plot_groups(groups, path, target=None):
  """Eval return against env steps on one axes, one colour per group.

  Args:
    groups: [(name, [(env_steps, eval_returns) per run])].
    path: the PNG to write.
    target: drawn as a dashed line when given.
  """
  import matplotlib  # pylint: disable=import-outside-toplevel
  matplotlib.use('Agg')  # files only: reports are made on machines without a display
  import matplotlib.pyplot as plt  # pylint: disable=import-outside-toplevel
  from matplotlib import ticker  # pylint: disable=import-outside-toplevel

  fig, ax = plt.subplots(figsize=(8, 5))
  for i, (name, curves) in enumerate(groups):
    color = f'C{i % 10}'
    # Mean and band only where every seed has evals; see aggregate_curves.
    grid, mean, low, high = learning.aggregate_curves(curves)
    if len(grid) > 1:
      ax.fill_between(grid, low, high, color=color, alpha=0.2)
      ax.plot(grid, mean, color=color, linewidth=2, label=f'{name} ({len(curves)} runs)')
    else:
      # One common point (or none) draws no line: show the seeds' own curves.
      for j, (steps, returns) in enumerate(curves):
        ax.plot(steps, returns, color=color, marker='.',
                label=f'{name} ({len(curves)} runs)' if j == 0 else None)
  if target is not None:
    ax.axhline(target, color='gray', linestyle='--', label=f'target {target:g}')
  ax.set_xlabel('env steps')
  steps_label = learning.steps_label
  ax.xaxis.set_major_formatter(ticker.FuncFormatter(steps_label))
  ax.set_ylabel('eval return (greedy)')
  ax.set_title('eval return: mean and min–max over seeds')
  ax.grid(alpha=0.3)
  if ax.get_legend_handles_labels()[0]:
    ax.legend(loc='best', fontsize='small')
  fig.tight_layout()
  fig.savefig(path, dpi=100)
  plt.close(fig)


def make_report(runs_dir, target=None):
  """Writes report.md and learning_curves.png into `runs_dir`; returns the markdown.

  Raises:
    ValueError: `runs_dir` is missing or holds no run.
  """
  if not os.path.isdir(runs_dir):
    raise ValueError(f"'{runs_dir}' is not a folder; pass a run folder or a folder of runs.")
  run_dirs = find_runs(runs_dir)
  if not run_dirs:
    raise ValueError(f"no {METRICS_FILE} in '{runs_dir}' or its subfolders "
                     f'(up to {MAX_DEPTH} levels down).')
  default_name = os.path.basename(os.path.abspath(runs_dir))
  sections, curves = [], []
  for name, group in group_runs(run_dirs, default_name):
    records_per_run = [read_metrics(run_dir) for run_dir in group]
    row = summarize_group(name, records_per_run, target)
    # A lone run folder given as RUNS_DIR is named by itself, not '.'.
    run_names = [os.path.relpath(run_dir, runs_dir) if run_dir != runs_dir else default_name
                 for run_dir in group]
    sections.append(format_group(row, run_names, target))
    curves.append((name, [learning.eval_curve(records) for records in records_per_run]))
  note = ('Final eval_return: each run\'s last finite eval_return; mean ± population std '
          'over the runs.')
  if target is not None:
    note += (' Medians are over the runs reaching the target; seconds sum the epochs\' '
             'time_collect + time_train + time_eval up to the first eval >= target.')
  text = f'# Report: {default_name}\n\n' + '\n\n'.join(sections) + '\n\n' + note + '\n'
  with open(os.path.join(runs_dir, REPORT_FILE), 'w') as f:
    f.write(text)
  plot_groups(curves, os.path.join(runs_dir, PLOT_FILE), target)
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
