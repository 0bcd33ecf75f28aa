"""Learning-curve arithmetic over runs' metrics.jsonl records (pure functions).

Shared by benchmarks/learning.py (configs x seeds against their targets) and
rl.report (any folder of runs): when each run first reaches a target eval
return, its final eval, and mean / min-max curves over seeds on a common
env-step grid.
"""
import json
import math
import statistics

CURVE_POINTS = 200  # points of the common env-step grid the seeds are averaged on


def finite(value):
  """`value` as a float, or None when it is missing, null or NaN/inf."""
  if value is None:
    return None
  value = float(value)
  return value if math.isfinite(value) else None


def epoch_seconds(record):
  """Wall seconds of one epoch: collect + train + eval (missing parts count 0)."""
  return sum(finite(record.get(k)) or 0.0 for k in ('time_collect', 'time_train', 'time_eval'))


def time_to_target(records, target, budget, key='eval_return'):
  """Where one run first reaches `target` within `budget` env steps.

  Args:
    records: the run's metrics.jsonl records (any order).
    target: the return to reach (`key` >= target counts).
    budget: the most env steps the reaching epoch may have used.
    key: the record's return: eval_return, or train_return.

  Returns:
    {'reached', 'epoch', 'env_steps', 'wall_seconds'}; the last three are None
    when not reached. wall_seconds sums the epochs' collect, train and eval
    times up to and including the reaching one, so process start-up and JIT
    compilation outside the epochs are not counted.
  """
  wall = 0.0
  for record in sorted(records, key=lambda r: r['epoch']):
    wall += epoch_seconds(record)
    if record['env_steps'] > budget:
      # env_steps only grows, so no later epoch can be within the budget.
      break
    value = finite(record.get(key))
    if value is not None and value >= target:
      return {'reached': True, 'epoch': record['epoch'], 'env_steps': record['env_steps'],
              'wall_seconds': wall}
  return {'reached': False, 'epoch': None, 'env_steps': None, 'wall_seconds': None}


def final_eval(records, key='eval_return'):
  """The eval_return (or other `key`) of the last epoch that has one (None if no epoch does).

  The last epoch itself may have a null eval (e.g. no eval episode ended), so
  the latest finite one stands for where the run ended up.
  """
  for record in sorted(records, key=lambda r: r['epoch'], reverse=True):
    value = finite(record.get(key))
    if value is not None:
      return value
  return None


def eval_curve(records, key='eval_return'):
  """(env_steps, eval_return) lists of the epochs with a finite eval (or `key`), by epoch."""
  steps, returns = [], []
  for record in sorted(records, key=lambda r: r['epoch']):
    value = finite(record.get(key))
    if value is not None:
      steps.append(record['env_steps'])
      returns.append(value)
  return steps, returns


def summarize_run(records, target, budget):
  """Everything the table needs from one run; `records` None marks a failed run.

  'last_env_steps' is where the run stopped: a run that missed its target but
  stopped short of the budget (too few train_rl.n_epochs) says nothing about
  the budget, and the report says so.
  """
  if records is None:
    return {'ok': False, **time_to_target([], target, budget), 'final': None,
            'last_env_steps': None}
  return {'ok': True, **time_to_target(records, target, budget), 'final': final_eval(records),
          'last_env_steps': max((r['env_steps'] for r in records), default=0)}


def stopped_short(run, budget):
  """Whether a run missed the target without having used its whole budget."""
  return run['ok'] and not run['reached'] and run['last_env_steps'] < budget


def summarize_config(name, target, budget, runs):
  """One table row from the per-seed summaries (`summarize_run` outputs) of a config.

  Seeds that failed or never reached the target still count in the
  denominator of `n_reached`; the medians are over the reaching seeds only
  (there is no step count for the others), and the final mean/std over the
  seeds that logged an eval. std is the population std (ddof=0), so that a
  single seed gives 0 rather than undefined.
  """
  reached = [r for r in runs if r['reached']]
  # Figures copied from elsewhere may lack the seconds (benchmarks/learning_records.py).
  walls = [r['wall_seconds'] for r in reached if r['wall_seconds'] is not None]
  finals = [r['final'] for r in runs if r['final'] is not None]
  floor = holding_floor(target)
  return {
      'config': name,
      'target': target,
      'budget': budget,
      'n_reached': len(reached),
      'n_runs': len(runs),
      'median_steps': statistics.median(r['env_steps'] for r in reached) if reached else None,
      'median_seconds': statistics.median(walls) if walls else None,
      'final_mean': statistics.fmean(finals) if finals else None,
      'final_std': statistics.pstdev(finals) if finals else None,
      'n_final': len(finals),
      'final_min': min(finals) if finals else None,
      # Seeds whose final eval is still within 10% of |target| of the target:
      # a config that solves its task and then unlearns it does not hold.
      'n_holding': (sum(f >= floor for f in finals)
                    if floor is not None else None),
  }


def holding_floor(target):
  """The lowest final eval that still counts as holding `target`: 10% of |target| below it."""
  if target is None:
    return None
  return target - 0.1 * abs(target)


def fmt_number(value, digits=0):
  if value is None:
    return '—'
  return f'{value:,.{digits}f}'


def fmt_target(value):
  """A target as its registry gives it: 475, or 6.4 where it has a decimal."""
  return fmt_number(value, 0 if float(value).is_integer() else 1)


def format_table(rows, final_label='final eval at budget (mean ± std)', extra_columns=()):
  """The markdown table of `summarize_config` rows.

  `final_label` heads the final-eval column (runs stopped at their target
  end there, not at their budget). The last two columns say where the runs
  ended: the lowest final eval over the seeds, and how many seeds ended
  within 10% of |target| of the target. `extra_columns` appends (header,
  row key) columns of numbers (e.g. process seconds), '—' where missing.
  """
  header = ('| config | target | budget (env steps) | seeds reaching target | '
            'median env steps to target | median wall s to target | '
            f'{final_label} | lowest final | seeds holding (within 10%) |')
  header += ''.join(f' {title} |' for title, _ in extra_columns)
  lines = [header, '|' + '---|' * (9 + len(extra_columns))]
  for row in rows:
    if row['final_mean'] is None:
      final = '—'
    else:
      final = f"{row['final_mean']:.1f} ± {row['final_std']:.1f}"
      if row['n_final'] != row['n_runs']:
        # Say when the mean is over fewer seeds than the row ran.
        final += f" ({row['n_final']}/{row['n_runs']} seeds)"
    holding = '—' if row['n_final'] == 0 else f"{row['n_holding']}/{row['n_runs']}"
    lines.append(
        f"| {row['config']} | {fmt_target(row['target'])} | {fmt_number(row['budget'])} | "
        f"{row['n_reached']}/{row['n_runs']} | {fmt_number(row['median_steps'])} | "
        f"{fmt_number(row['median_seconds'], 1)} | {final} | "
        f"{fmt_number(row['final_min'], 1)} | {holding} |"
        + ''.join(f' {fmt_number(row.get(key), 1)} |' for _, key in extra_columns))
  return '\n'.join(lines)


def _interp(x, xs, ys):
  """Piecewise-linear ys(x) for xs ascending and xs[0] <= x <= xs[-1]."""
  lo, hi = 0, len(xs) - 1
  while hi - lo > 1:  # bisection: the segment [xs[lo], xs[hi]] holding x
    mid = (lo + hi) // 2
    if xs[mid] <= x:
      lo = mid
    else:
      hi = mid
  if xs[hi] == xs[lo]:
    return ys[hi]
  frac = (x - xs[lo]) / (xs[hi] - xs[lo])
  frac = min(max(frac, 0.0), 1.0)
  return ys[lo] + frac * (ys[hi] - ys[lo])


def common_grid(curves, n_points=CURVE_POINTS):
  """(grid, [the seeds' values at x, per x of grid]) of (x, returns) curves.

  Seeds log evals at different env steps (an epoch of whole trajectories has
  no fixed length), so each curve is linearly interpolated onto one grid. The
  grid spans only the x every seed covers: outside a seed's range its value
  would be made up, and a band over fewer seeds would look narrower than it
  is. Both are empty when no x is covered by every seed (no curves, or a seed
  with no eval).
  """
  curves = list(curves)  # may be a generator; it is walked several times
  if not curves or any(not steps for steps, _ in curves):
    return [], []
  start = max(steps[0] for steps, _ in curves)
  stop = min(steps[-1] for steps, _ in curves)
  if start > stop:
    return [], []
  if start == stop or n_points < 2:
    grid = [float(start)]
  else:
    grid = [start + (stop - start) * i / (n_points - 1) for i in range(n_points)]
  return grid, [[_interp(x, steps, returns) for steps, returns in curves] for x in grid]


def aggregate_curves(curves, n_points=CURVE_POINTS):
  """Mean and min-max over seeds of (env_steps, returns) curves on their `common_grid`.

  Returns:
    (grid, mean, low, high) lists, all empty when no grid is covered by every seed.
  """
  grid, columns = common_grid(curves, n_points)
  mean, low, high = [], [], []
  for values in columns:
    mean.append(statistics.fmean(values))
    low.append(min(values))
    high.append(max(values))
  return grid, mean, low, high


def read_records(path):
  """The records of a metrics.jsonl, or None if it is missing or unreadable."""
  try:
    with open(path) as f:
      return [json.loads(line) for line in f if line.strip()]
  except (OSError, json.JSONDecodeError):
    return None


def steps_label(value, _):
  """Env-step ticks as 0, 50k, 1.5M: six-digit tick labels collide."""
  if abs(value) >= 1e6:
    return f'{value / 1e6:g}M'
  return f'{value / 1e3:g}k' if value else '0'
