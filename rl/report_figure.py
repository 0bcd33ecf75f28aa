"""rl.report's figure: a panel per env, each group's aggregate curve over its runs with its CI.

Returns of different envs are on different scales, so each env gets its own
axes. A group is drawn as its runs' IQM (or mean) on the x the runs all
cover, with the 95% bootstrap CI (rl.aggregate) as a band; a group of fewer
than MIN_RUNS_FOR_CI runs has no band and its runs are drawn thin beside the
aggregate instead. Unfinished runs are drawn dashed, apart from the aggregate.
"""
import collections

import numpy as np

from rl import aggregate
from rl import learning_curves as learning

# Group i of a panel is drawn in colour C(i % 10) with line style i // 10: 10 colours repeat.
LINE_STYLES = ('-', '--', ':', '-.')
PANEL_SIZE = (10, 4)  # inches, per panel; the legend takes the right third
CURVE_REPS = 2_000  # bootstrap resamples at each of a curve's points (rl.aggregate.REPS per value)

# name: the group's; finished, unfinished: its runs' (x, returns) curves.
GroupCurves = collections.namedtuple('GroupCurves', 'name finished unfinished')


def aggregate_curve(curves, how):
  """(grid, aggregate, low, high) of `curves` on their common grid; None below two points.

  low and high are None when there are fewer than MIN_RUNS_FOR_CI curves.
  """
  grid, columns = learning.common_grid(curves)
  if len(grid) < 2:
    return None
  values = np.array(columns).T  # (runs, points): resampled by run
  value = aggregate.aggregate(values, how)
  if len(curves) < aggregate.MIN_RUNS_FOR_CI:
    return grid, value, None, None
  low, high = aggregate.bootstrap_ci(values, how, reps=CURVE_REPS)
  return grid, value, low, high


def _draw_group(ax, group, style, how):
  n = len(group.finished)
  if n:
    no_ci = ', no CI' if n < aggregate.MIN_RUNS_FOR_CI else ''
    label = f'{group.name} ({n} run{"s" * (n != 1)}{no_ci})'
    curve = aggregate_curve(group.finished, how)
    if curve is None:
      # One common point (or none) draws no line: show the runs' own curves.
      for j, (xs, ys) in enumerate(group.finished):
        ax.plot(xs, ys, marker='.', label=None if j else label, **style)
    else:
      grid, value, low, high = curve
      ax.plot(grid, value, linewidth=2, label=label, **style)
      if low is not None:
        ax.fill_between(grid, low, high, color=style['color'], alpha=0.2)
      else:
        for xs, ys in group.finished:
          ax.plot(xs, ys, linewidth=0.8, alpha=0.5, **style)
  for j, (xs, ys) in enumerate(group.unfinished):
    label = f'{group.name}: {len(group.unfinished)} unfinished'
    ax.plot(xs, ys, color=style['color'], linestyle='--', linewidth=1, marker='.',
            label=None if j else label)


def curves_figure(panels, how='iqm', target=None, x_label='env steps',
                  y_label='eval return (greedy)'):
  """One axes per env, stacked, each with its legend to its right.

  Args:
    panels: [(env name, [GroupCurves])]; group i of a panel is drawn in
      colour i % 10 and line style i // 10.
    how: the aggregate, 'iqm' or 'mean'.
    target: drawn as a dashed gray line when given.
    x_label, y_label: the axes' labels; env steps are ticked as 50k, 1.5M.

  Returns:
    The matplotlib figure; close it with plt.close.
  """
  import matplotlib  # pylint: disable=import-outside-toplevel
  matplotlib.use('Agg')  # files only: reports are made on machines without a display
  import matplotlib.pyplot as plt  # pylint: disable=import-outside-toplevel
  from matplotlib import ticker  # pylint: disable=import-outside-toplevel

  # Constrained layout makes room for legends outside the axes, where they
  # cover no curve however many groups there are.
  width, height = PANEL_SIZE
  fig, axes = plt.subplots(len(panels), 1, figsize=(width, height * len(panels) + 0.5),
                           layout='constrained', squeeze=False)
  for ax, (env, groups) in zip(axes[:, 0], panels):
    for i, group in enumerate(groups):
      style = {'color': f'C{i % 10}', 'linestyle': LINE_STYLES[i // 10 % len(LINE_STYLES)]}
      _draw_group(ax, group, style, how)
    if target is not None:
      ax.axhline(target, color='gray', linestyle='--', linewidth=1, label=f'target {target:g}')
    ax.set_title(env)
    ax.set_xlabel(x_label)
    if x_label == 'env steps':
      ax.xaxis.set_major_formatter(ticker.FuncFormatter(learning.steps_label))
    ax.set_ylabel(y_label)
    ax.grid(alpha=0.3)
    if ax.get_legend_handles_labels()[0]:
      ax.legend(loc='upper left', bbox_to_anchor=(1.01, 1), fontsize='small',
                ncols=1 + len(groups) // 25)  # taller than the axes past ~25 entries
  fig.suptitle(f'{y_label}: {aggregate.LABELS[how]} of the finished runs, band: 95% bootstrap '
               f'CI ({aggregate.MIN_RUNS_FOR_CI}+ runs)\nthin: the runs of a smaller group; '
               'dashed: unfinished runs', fontsize='medium')
  return fig


def plot(panels, path, **kwargs):
  """Writes `curves_figure(panels, **kwargs)` to the PNG `path`."""
  import matplotlib.pyplot as plt  # pylint: disable=import-outside-toplevel
  fig = curves_figure(panels, **kwargs)
  fig.savefig(path, dpi=100)
  plt.close(fig)
