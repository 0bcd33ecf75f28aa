"""Learning benchmark: does each config reach its target eval return within its budget?

Every (config, seed) runs as its own `python -m rl.run` process
(benchmarks/learning_runs.py), at most --parallel at once, into
<output_dir>/<config>/seed_<n>. From each run's metrics.jsonl it takes the
first epoch whose greedy eval_return reaches the config's target with
env_steps within its budget, and writes:
  <output_dir>/results.md           a markdown table, one row per config
                                    (also printed);
  <output_dir>/learning_curves.png  eval return against env steps per config:
                                    mean over seeds and min-max band.
Rerunning on the same --output_dir resumes unfinished runs and only re-reads
finished ones (rl.run makes a finished run a no-op). A failed run is reported
and counted as not reaching its target; the rest still run, and the exit
status is 1 only at the end, so scripts can notice.

With --process_wall every run stops at its target and is timed whole, as a
user waits for it: once on an empty compilation cache and once on the cache
that run filled (two more columns). Only runs made from nothing are timed
(use a new --output_dir), and `python -c "import jax, flax, optax"` is timed
before the runs as a reference for the machine's speed at the time.

With --write_docs the measured seeds are also stored as records in
benchmarks/results/<config>.json (benchmarks/learning_records.py), their
curves drawn to docs/curves/<config>.png, and docs/results.md rendered again
from every stored record (benchmarks/results_page.py). --render_only renders
the page from the records without running anything; --summary prints the
one-line-per-config summary of the records.

Usage: python benchmarks/learning.py [--configs reinforce_cartpole,ppo_cartpole]
         [--seeds 0,1,2] [--output_dir runs/learning] [--parallel N]
         [--extra_config 'train_rl.n_epochs = 50' ...] [--stop_at_target]
         [--process_wall] [--write_docs]
       python benchmarks/learning.py --render_only | --summary
"""
import argparse
import os
import shlex
import statistics
import sys

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

sys.path.insert(0, REPO_ROOT)  # runnable from a checkout without installing the package
# pylint: disable=wrong-import-position
from benchmarks import learning_records  # noqa: E402
from benchmarks import learning_runs  # noqa: E402
from benchmarks import results_page  # noqa: E402
from benchmarks.learning_plot import plot_curves  # noqa: E402
from benchmarks.learning_runs import CONFIG_DIR  # noqa: E402
from benchmarks.learning_runs import process_seconds  # noqa: E402
from benchmarks.learning_runs import reference_seconds  # noqa: E402
from benchmarks.learning_runs import run_dir  # noqa: E402
from rl.learning_curves import aggregate_curves  # noqa: E402,F401  (tests use it from here)
from rl.learning_curves import eval_curve  # noqa: E402
from rl.learning_curves import final_eval  # noqa: E402,F401  (tests use it from here)
from rl.learning_curves import fmt_number  # noqa: E402
from rl.learning_curves import format_table  # noqa: E402
from rl.learning_curves import read_records  # noqa: E402
from rl.learning_curves import stopped_short  # noqa: E402
from rl.learning_curves import summarize_config  # noqa: E402
from rl.learning_curves import summarize_run  # noqa: E402
from rl.learning_curves import time_to_target  # noqa: E402,F401
METRICS_FILE = 'metrics.jsonl'  # rl.metrics.METRICS_FILE; not imported so this
                                # script needs neither jax nor the package.

# config name -> (target greedy eval return, env-step budget to reach it in).
# Entries whose configs/<name>.gin does not exist yet are skipped by default,
# so a config added later is benchmarked as soon as its file lands.
REGISTRY = {
    'reinforce_cartpole': (475, 300_000),
    'ppo_cartpole': (475, 100_000),
    'a2c_cartpole': (475, 100_000),
    'awr_cartpole': (475, 300_000),
    'sampling_awr_cartpole': (475, 300_000),
    'ppo_pendulum': (-250, 500_000),
    'awr_pendulum': (-250, 300_000),
    'ppo_joint_cartpole': (475, 100_000),
    'a2c_joint_cartpole': (475, 500_000),
    'awr_joint_cartpole': (475, 300_000),
    'ppo_joint_pendulum': (-250, 500_000),
    'ppo_joint_acrobot': (-100, 300_000),
    'dqn_cartpole': (475, 100_000),
    'double_dqn_cartpole': (475, 100_000),
    'dqn_acrobot': (-100, 100_000),
    'ppo_minatar_breakout': (7, 1_000_000),
    'dqn_minatar_breakout': (7, 1_000_000),
    'ppo_cartpole_jax': (475, 100_000),
    'dqn_cartpole_jax': (475, 100_000),
    'ppo_minatar_breakout_jax': (7, 1_000_000),
    'ppo_joint_lunarlander': (200, 1_000_000),
    'ppo_halfcheetah': (1500, 1_000_000),
    'ppo_joint_halfcheetah': (4000, 1_000_000),
    'ppo_cartpole_transformer': (475, 200_000),
    'ppo_cartpole_novel': (475, 500_000),
    'ppo_cartpole_novel_transformer': (475, 500_000),
    'ppo_joint_lunarlander_transformer': (200, 1_000_000),
    'awr_halfcheetah': (1500, 1_000_000),
    'sac_mujoco': (9000, 1_000_000),
    'sac_hopper': (2300, 1_000_000),
    'sac_walker2d': (3800, 1_000_000),
    'td3_mujoco': (9000, 1_000_000),
    'ppo_mujoco': (2400, 1_000_000),
    'ppo_walker2d': (3000, 1_000_000),
    # rejax's PPO at its breakout_1m settings on the same 5M env steps, the mean final greedy
    # return of its seeds 0-2 rounded up (benchmarks/rejax_minatar.py): no PPO return at 5M env
    # steps is published for gymnax's MinAtar games that we found. Seaquest has neither (rejax's
    # gymnax has no Seaquest): its target, 1, is 12x random play (0.08), a check that it learns at
    # all, not a bar from another implementation.
    'ppo_minatar_jax': (7.1, 5_000_000),
    'ppo_minatar_jax_breakout': (6.4, 5_000_000),
    'ppo_minatar_jax_freeway': (30.3, 5_000_000),
    'ppo_minatar_jax_space_invaders': (131, 5_000_000),
    'ppo_minatar_jax_seaquest': (1, 5_000_000),
}


# -- the command line and its outputs ----------------------------------------------


def _parse_args(argv=None):
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument('--configs', default=None,
                      help='comma-separated registry names (default: every registry entry '
                      'whose configs/<name>.gin exists)')
  parser.add_argument('--seeds', default='0,1,2', help='comma-separated integer seeds')
  parser.add_argument('--output_dir', default=os.path.join('runs', 'learning'),
                      help='runs go to <output_dir>/<config>/seed_<n>')
  cpus = os.cpu_count() or 1
  parser.add_argument('--parallel', type=int, default=cpus,
                      help=f'runs at once (default and maximum: the {cpus} CPUs)')
  parser.add_argument('--extra_config', action='append', default=[],
                      help='a gin binding passed to every run; repeatable')
  parser.add_argument('--stop_at_target', action='store_true',
                      help='stop each run once its eval return reaches the target '
                      '(final evals are then the values at the stop)')
  parser.add_argument('--process_wall', action='store_true',
                      help='time each run as a user waits for it, whole process included, '
                      'on a cold and then a warm compilation cache (adds two columns; '
                      'implies --stop_at_target; use --parallel 1 on a quiet machine)')
  parser.add_argument('--write_docs', action='store_true',
                      help='after the runs, store their records in --records_dir, draw their '
                      'curves into --curves_dir and render --results_page from every record')
  parser.add_argument('--render_only', action='store_true',
                      help='run nothing: render --results_page from the stored records')
  parser.add_argument('--summary', action='store_true',
                      help='run nothing: print one line per stored record (config, target, '
                      'seeds reaching it, median env steps, final eval)')
  parser.add_argument('--records_dir', default=learning_records.RECORDS_DIR,
                      help='where the records live, one <config>.json each')
  parser.add_argument('--results_page', default=results_page.PAGE,
                      help='the markdown page rendered from the records')
  parser.add_argument('--curves_dir', default=results_page.CURVES_DIR,
                      help="where --write_docs draws each config's curves as <config>.png")
  args = parser.parse_args(argv)
  if args.render_only or args.summary:
    return args
  if args.process_wall:
    args.stop_at_target = True

  if args.configs is None:
    args.configs = [name for name in REGISTRY
                    if os.path.isfile(os.path.join(CONFIG_DIR, name + '.gin'))]
    if not args.configs:
      parser.error(f'no registry config has a file in {CONFIG_DIR}')
  else:
    args.configs = [c.strip() for c in args.configs.split(',') if c.strip()]
    for name in args.configs:
      if name not in REGISTRY:
        parser.error(f"unknown config '{name}'; known: {', '.join(REGISTRY)}")
      if not os.path.isfile(os.path.join(CONFIG_DIR, name + '.gin')):
        parser.error(f"config '{name}' is in the registry but configs/{name}.gin "
                     'does not exist yet')
  try:
    args.seeds = [int(s) for s in args.seeds.split(',') if s.strip()]
  except ValueError:
    parser.error(f'--seeds must be comma-separated integers, got {args.seeds!r}')
  if not args.seeds:
    parser.error('--seeds is empty')
  if args.parallel < 1:
    parser.error('--parallel must be >= 1')
  # More runs than cores would only slow each one down and skew its wall time.
  args.parallel = min(args.parallel, cpus)
  return args


def main(argv=None):
  args = _parse_args(argv)
  try:
    if args.summary:
      print(results_page.render_summary(results_page.stored_records(args.records_dir, REGISTRY)),
            end='')
      return 0
    if args.render_only:
      results_page.write_docs(args.records_dir, args.results_page, args.curves_dir, REGISTRY)
      return 0
  except learning_records.RecordError as e:
    print(f'error: {e}', file=sys.stderr)
    return 2
  output_dir = os.path.abspath(args.output_dir)
  os.makedirs(output_dir, exist_ok=True)
  jobs = [(config, seed) for config in args.configs for seed in args.seeds]
  reference = None
  if args.process_wall:
    reference = reference_seconds()
    print(f"machine reference: `python -c 'import jax, flax, optax'` took {reference:.2f} s",
          flush=True)
  print(f'{len(jobs)} runs ({len(args.configs)} configs x {len(args.seeds)} seeds), '
        f'{args.parallel} at a time, into {output_dir}', flush=True)
  stop_at = ({config: REGISTRY[config][0] for config in args.configs}
             if args.stop_at_target else None)
  finished = learning_runs.run_all(jobs, output_dir, args.extra_config, args.parallel, stop_at,
                                   args.process_wall)

  rows, panels, failures, short, untimed = [], [], [], [], []
  for config in args.configs:
    target, budget = REGISTRY[config]
    runs, curves, entries = [], [], []
    for seed in args.seeds:
      records = None
      if finished.get((config, seed)):
        # A failed run's metrics are not used: it may have been refused for
        # holding an earlier run with another config, whose records they are.
        records = read_records(os.path.join(run_dir(output_dir, config, seed), METRICS_FILE))
      if records is None:
        failures.append(f'{config} seed {seed}')
      else:
        curves.append(eval_curve(records))
      summary = summarize_run(records, target, budget)
      runs.append(summary)
      entries.append(learning_records.seed_record(
          seed, records, target, budget,
          learning_records.read_stamp(run_dir(output_dir, config, seed))))
      if stopped_short(summary, budget):
        short.append(f"{config} seed {seed} ({summary['last_env_steps']:,} of {budget:,})")
      reached = (f"{summary['env_steps']:,} env steps, {summary['wall_seconds']:.1f} s, "
                 f"epoch {summary['epoch']}" if summary['reached'] else 'not reached')
      print(f'{config} seed {seed}: target {reached}; final eval {fmt_number(summary["final"], 1)}')
    row = summarize_config(config, target, budget, runs)
    if args.process_wall:
      timed = {seed: process_seconds(output_dir, config, seed) for seed, run in
               zip(args.seeds, runs) if run['reached']}
      untimed.extend(f'{config} seed {seed}' for seed, t in timed.items() if t is None)
      for kind in ('cold', 'warm'):
        values = [t[kind] for t in timed.values() if t]
        row[f'process_{kind}'] = statistics.median(values) if values else None
    rows.append(row)
    panels.append({'config': config, 'target': target, 'budget': budget, 'curves': curves,
                   'n_reached': row['n_reached'], 'n_runs': row['n_runs']})
    if args.write_docs:
      command = shlex.join(['python', 'benchmarks/learning.py'] + list(
          sys.argv[1:] if argv is None else argv))
      learning_records.store(args.records_dir, learning_records.config_record(
          config, target, budget, entries, args.stop_at_target, args.extra_config, command))

  extra = ((('median process s to target, cold cache', 'process_cold'),
            ('median process s to target, warm cache', 'process_warm'))
           if args.process_wall else ())
  table = format_table(rows, 'final eval at the stop (mean ± std)' if args.stop_at_target
                       else 'final eval at budget (mean ± std)', extra)
  notes = ['', f"Seeds: {', '.join(map(str, args.seeds))}."
           + (f" Extra bindings: {'; '.join(args.extra_config)}." if args.extra_config else ''),
           'Target: the first epoch whose greedy eval_return >= target with env steps <= '
           'budget. Medians are over the seeds that reached it; wall seconds sum the '
           "epochs' collect + train + eval times (start-up excluded). Final eval: the "
           "run's last eval_return, mean ± population std over seeds"
           + (' (runs stopped at their first eval at or above the target).'
              if args.stop_at_target else ', at the end of the budget.')
           + ' Holding: seeds whose final eval is at least the target minus 10% of |target|.'
           + (' Process seconds: the whole `python -m rl.run` process of a fresh run, '
              'start-up and compilation included, stopped at the target; cold: an empty '
              'compilation cache, warm: the same run again with the cache the cold one '
              'filled; medians over the seeds that reached the target.'
              if args.process_wall else '')]
  unstable = [row['config'] for row in rows
              if row['n_final'] and row['n_holding'] < row['n_runs'] and not args.stop_at_target]
  if unstable:
    notes.append('Unstable (a seed ends more than 10% of |target| below the target): '
                 f"{', '.join(unstable)}.")
  if short:
    notes.append('Runs that missed the target but stopped before the budget (raise '
                 f"train_rl.n_epochs, e.g. with --extra_config): {', '.join(short)}.")
  if reference is not None:
    notes.append(f"Machine reference: `python -c 'import jax, flax, optax'` took {reference:.2f} s "
                 '(median of 3, before the runs); on a shared machine process times move '
                 'with it.')
  if untimed:
    notes.append('No process seconds for runs that existed before this benchmark (resumed, '
                 f"not timed from the start; use a new --output_dir): {', '.join(untimed)}.")
  if failures:
    notes.append(f"Failed runs (counted as not reaching the target): {', '.join(failures)}.")
  results_path = os.path.join(output_dir, 'results.md')
  with open(results_path, 'w') as f:
    f.write(table + '\n' + '\n'.join(notes) + '\n')
  plot_path = os.path.join(output_dir, 'learning_curves.png')
  plot_curves(panels, plot_path)
  print()
  print(table)
  print('\n'.join(notes[1:]))
  print(f'\nWrote {results_path} and {plot_path}')
  if args.write_docs:
    results_page.write_docs(args.records_dir, args.results_page, args.curves_dir, REGISTRY,
                             args.configs)
  return 1 if failures else 0


if __name__ == '__main__':
  sys.exit(main())

