"""Aggregates over a group's runs: interquartile mean (or mean) with a 95% bootstrap CI.

rl.report compares groups of runs as rliable (Agarwal et al., "Deep RL at the
Edge of the Statistical Precipice", 2021) recommends: the interquartile mean
(IQM: the mean of the middle 50% of the runs' values, as rliable's
`scipy.stats.trim_mean(values, 0.25)`) with a 95% percentile bootstrap
confidence interval, the runs resampled with replacement (rliable's stratified
bootstrap; a group is one task, so its one stratum is the group's runs).

Why numpy and not rliable: the statistics are a dozen lines here, while
rliable brings arch (for its bootstrap), scipy and seaborn with their own
dependencies into an install whose only numeric dependency is JAX. The
resampling draws from a fixed seed, so the same runs give the same report.
With fewer than MIN_RUNS_FOR_CI runs a percentile interval is not a
confidence interval (two runs resample to three values), so none is given.
"""
import collections

import numpy as np

AGGREGATES = ('iqm', 'mean')
LABELS = {'iqm': 'IQM', 'mean': 'mean'}
MIN_RUNS_FOR_CI = 3
CONFIDENCE = 0.95
REPS = 10_000  # bootstrap resamples of the runs
SEED = 0  # the resampling's seed: a report is reproducible

# value: the aggregate; low, high: its CI (None below MIN_RUNS_FOR_CI runs); n: the runs.
Estimate = collections.namedtuple('Estimate', 'value low high n')


def iqm(values, axis=0):
  """Interquartile mean along `axis`: int(n / 4) values cut from each end, the rest averaged.

  The same cut as scipy.stats.trim_mean(values, 0.25), so a group of 2 or 3
  runs is their mean and one of 4 the mean of its middle two.
  """
  values = np.sort(np.asarray(values, dtype=float), axis=axis)
  n = values.shape[axis]
  cut = int(0.25 * n)
  return np.take(values, range(cut, n - cut), axis=axis).mean(axis=axis)


def aggregate(values, how, axis=0):
  """The `how` ('iqm' or 'mean') of `values` along `axis`."""
  if how == 'iqm':
    return iqm(values, axis)
  if how == 'mean':
    return np.asarray(values, dtype=float).mean(axis=axis)
  raise ValueError(f"unknown aggregate '{how}'; use one of {', '.join(AGGREGATES)}.")


def bootstrap_ci(values, how, reps=REPS, seed=SEED, confidence=CONFIDENCE):
  """The percentile bootstrap CI of `aggregate(values, how)` over the runs (axis 0).

  `values` is (runs,) or (runs, points): each resample draws runs with
  replacement and keeps a run's whole row, as rliable does for curves.
  Returns (low, high), each of the shape of one row.
  """
  values = np.asarray(values, dtype=float)
  rng = np.random.default_rng(seed)
  picks = rng.integers(0, len(values), size=(reps, len(values)))
  stats = aggregate(values[picks], how, axis=1)  # (reps,) + the shape of one row
  tail = 100 * (1 - confidence) / 2
  low, high = np.percentile(stats, [tail, 100 - tail], axis=0)
  return low, high


def estimate(values, how, reps=REPS):
  """Estimate of the finite `values` (one per run); None when there are none."""
  values = [v for v in values if v is not None and np.isfinite(v)]
  if not values:
    return None
  value = float(aggregate(values, how))
  if len(values) < MIN_RUNS_FOR_CI:
    return Estimate(value, None, None, len(values))
  low, high = bootstrap_ci(values, how, reps)
  return Estimate(value, float(low), float(high), len(values))
