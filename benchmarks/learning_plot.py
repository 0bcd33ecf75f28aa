"""Eval-return curves of the learning benchmark's configs, one panel per config."""
import math

from rl.learning_curves import aggregate_curves
from rl.learning_curves import steps_label


def plot_curves(panels, path):
  """One subplot per config: mean eval return and min-max band over seeds.

  Args:
    panels: list of dicts with 'config', 'target', 'budget', 'curves' (the
      per-seed eval curves), 'n_reached' and 'n_runs'.
    path: the PNG to write.
  """
  import matplotlib  # pylint: disable=import-outside-toplevel
  matplotlib.use('Agg')  # files only: no display on benchmark machines
  import matplotlib.pyplot as plt  # pylint: disable=import-outside-toplevel
  from matplotlib import ticker  # pylint: disable=import-outside-toplevel

  n_cols = min(3, len(panels))
  n_rows = math.ceil(len(panels) / n_cols)
  fig, axes = plt.subplots(n_rows, n_cols, figsize=(5.5 * n_cols, 4 * n_rows), squeeze=False)
  for ax, panel in zip(axes.flat, panels):
    grid, mean, low, high = aggregate_curves(panel['curves'])
    # Band and mean only where every seed has evals; see aggregate_curves.
    n_seeds = len(panel['curves'])
    for i, (steps, returns) in enumerate(panel['curves']):
      # Faint per-seed lines show the data beyond the range every seed covers.
      ax.plot(steps, returns, color='C0', alpha=0.3, linewidth=0.8,
              label='single seeds' if i == 0 else None)
    if grid:
      ax.fill_between(grid, low, high, alpha=0.25, color='C0',
                      label=f'min–max, {n_seeds} seeds')
      ax.plot(grid, mean, color='C0', linewidth=2, label=f'mean, {n_seeds} seeds')
    else:
      ax.text(0.5, 0.7, 'no eval data', ha='center', va='center', transform=ax.transAxes,
              bbox={'facecolor': 'white', 'edgecolor': 'none'})
      if not panel['curves']:
        # Without data the x-axis would zoom onto the budget line alone.
        ax.set_xlim(0, panel['budget'] * 1.05)
    ax.axhline(panel['target'], color='C2', linestyle='--',
               label=f"target {panel['target']:g}")
    ax.axvline(panel['budget'], color='C3', linestyle='--',
               label=f"budget {panel['budget']:,} steps")
    ax.set_title(f"{panel['config']} ({panel['n_reached']}/{panel['n_runs']} reach target)")
    ax.set_xlabel('env steps')
    ax.xaxis.set_major_formatter(ticker.FuncFormatter(steps_label))
    ax.set_ylabel('eval return (greedy)')
    ax.grid(alpha=0.3)
    ax.legend(loc='best', fontsize='small')
  for ax in list(axes.flat)[len(panels):]:
    ax.set_visible(False)
  fig.tight_layout()
  fig.savefig(path, dpi=110)
  plt.close(fig)
