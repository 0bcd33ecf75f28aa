"""docs/results.md and the results summary, rendered from the learning benchmark's records.

Pure text from the records (benchmarks/learning_records.py) and the curve
images present in docs/curves/, so a test can render the page again and
compare it with the committed one.
"""
import os

from benchmarks import learning_records
from benchmarks.learning_plot import plot_curves
from rl.learning_curves import fmt_number
from rl.learning_curves import fmt_target
from rl.learning_curves import summarize_config

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PAGE = os.path.join(REPO_ROOT, 'docs', 'results.md')
CURVES_DIR = os.path.join(REPO_ROOT, 'docs', 'curves')
# Hand-written prose appended to the page: how the tuned values were chosen.
TUNING_NOTES = os.path.join(REPO_ROOT, 'benchmarks', 'results', 'tuning.md')
RENDER_COMMAND = 'python benchmarks/learning.py --render_only'

CLASSIC_CONTROL_ENVS = ('cartpole', 'pendulum', 'acrobot')
CLASSIC_CONTROL = 'Classic control'
REAL_WORKLOADS = 'Real workloads: MinAtar, Box2D, MuJoCo'
# Transformer bodies and the memory task they are measured on, beside its MLP baseline.
SEQUENCE_MARKERS = ('_transformer', '_novel')
SEQUENCE_MODELS = 'Sequence models: Transformer bodies and a memory task'
SECTIONS = (CLASSIC_CONTROL, REAL_WORKLOADS, SEQUENCE_MODELS)

INTRO = f"""\
# Results

This page is generated: `{RENDER_COMMAND}` renders it from the records in
`benchmarks/results/` (one JSON file per config), and `python benchmarks/learning.py ...
--write_docs` runs configs, stores their records and curves and renders it. Do not edit it by
hand; `tests/test_learning_benchmark.py` fails when it differs from the render of the records.

What each shipped config reaches: the greedy eval return (mean over the config's eval episodes)
against a target, the seeds reaching it within the config's env-step budget, the env steps to the
first eval at or above it, and the final eval. Targets and budgets are those of
`benchmarks/learning.py`'s `REGISTRY`. Medians are over the seeds that reach the target. Wall
seconds sum the epochs' collect, train and eval times (start-up and compilation excluded) on a
2-core machine shared with other work, so they are upper bounds. Final eval: mean ± population
std over the seeds, at the run's last eval; *runs stop at* says where that is (the first eval at
or above the target with `--stop_at_target`, else the end of the budget). A seed *holds* when its
final eval is at least the target minus 10% of |target|. *Source*: `run` rows are records of
`benchmarks/learning.py`'s own runs, with the commit and date each run started at; `transcribed`
rows are figures of runs made without records (hours each for the real workloads), copied from
the hand-written docs/results.md named in their source, with the commit that recorded them.
"""

ATARI = """\
## Atari

`ppo_joint_pong` and `ppo_joint_boxing` are not measured: 2.5M agent steps of a CNN are out of
reach of a 2-core CPU. On a GPU: `pip install -U 'jax[cuda12]'`, then `python -m rl.run
--config_file=configs/ppo_joint_pong.gin`.
"""

HEADER = ('| config | target | budget (env steps) | seeds reaching target | '
          'env steps to target, per seed | median | median wall s to target | '
          'final eval (mean ± std) | runs stop at | seeds holding | curves | source |')


def group(config):
  """The table a config belongs in: classic control, the real workloads or sequence models."""
  if any(marker in config for marker in SEQUENCE_MARKERS):
    return SEQUENCE_MODELS
  env = config[:-len('_jax')] if config.endswith('_jax') else config
  return CLASSIC_CONTROL if env.endswith(CLASSIC_CONTROL_ENVS) else REAL_WORKLOADS


def transcribed(record):
  return any(s['source'] != learning_records.MEASURED for s in record['seeds'])


def row(record):
  """summarize_config's row of a record's seeds."""
  runs = [{'ok': not s.get('failed', False), 'reached': s['reached'],
           'env_steps': s['env_steps_to_target'], 'wall_seconds': s['wall_seconds_to_target'],
           'final': s['final_eval'], 'last_env_steps': s['last_env_steps']}
          for s in record['seeds']]
  return summarize_config(record['config'], record['target'], record['budget'], runs)


def _seeds_label(seeds):
  """'seed 3', 'seeds 0, 2' or, for three or more consecutive seeds, 'seeds 0-7'."""
  if len(seeds) == 1:
    return f'seed {seeds[0]}'
  if len(seeds) > 2 and seeds == list(range(seeds[0], seeds[-1] + 1)):
    return f'seeds {seeds[0]}-{seeds[-1]}'
  return 'seeds ' + ', '.join(map(str, seeds))


def _final(summary):
  if summary['final_mean'] is None:
    return '—'
  return f"{summary['final_mean']:,.1f} ± {summary['final_std']:,.1f}"


def _stops(record):
  if record['stop_at_target']:
    return 'target'
  ends = {s['last_env_steps'] for s in record['seeds']}
  if len(ends) == 1 and None not in ends and ends != {record['budget']}:
    return f'{fmt_number(ends.pop())} steps'
  return 'budget'


def table_line(record, curves_dir=CURVES_DIR):
  """The markdown table line of one record."""
  r = row(record)
  seeds = [s['seed'] for s in record['seeds']]
  per_seed = '; '.join(fmt_number(s['env_steps_to_target']) for s in record['seeds'])
  final = _final(r)
  if r['final_mean'] is not None and r['n_final'] != r['n_runs']:
    final += f" ({r['n_final']}/{r['n_runs']} seeds)"
  holding = '—' if r['n_final'] == 0 else f"{r['n_holding']}/{r['n_runs']}"
  image = record['config'] + '.png'
  curves = (f'[curves](curves/{image})' if os.path.isfile(os.path.join(curves_dir, image))
            else '—')
  return (f"| {record['config']} | {fmt_target(record['target'])} | "
          f"{fmt_number(record['budget'])} | {r['n_reached']}/{r['n_runs']} "
          f"({_seeds_label(seeds)}) | {per_seed} | {fmt_number(r['median_steps'])} | "
          f"{fmt_number(r['median_seconds'], 1)} | {final} | {_stops(record)} | {holding} | "
          f"{curves} | {'transcribed' if transcribed(record) else 'run'} |")


def _provenance(seed):
  commit = (seed['commit'] or 'unknown commit')[:7]
  if seed['dirty']:
    commit += ' with uncommitted changes'
  date = (seed['date'] or 'unknown date')[:10]
  how = '' if seed['source'] == learning_records.MEASURED else f", {seed['source']}"
  return f'`{commit}` ({date}{how})'


def stamps(records):
  """Bullet lines: each commit and date the records come from, with their configs."""
  configs_by = {}
  for record in records:
    for seed in record['seeds']:
      names = configs_by.setdefault(_provenance(seed), [])
      if record['config'] not in names:
        names.append(record['config'])
  return [f"- {where}: {', '.join(names)}" for where, names in configs_by.items()]


def section(title, records, curves_dir=CURVES_DIR):
  lines = [f'## {title}', '', 'Measured at (commit, date):', ''] + stamps(records)
  commands = []
  for record in records:
    commands += [c for c in record['commands'] if c not in commands]
  lines += ['', 'Commands:', ''] + [f'    {c}' for c in commands]
  lines += ['', HEADER, '|' + '---|' * HEADER.count(' |')]
  lines += [table_line(r, curves_dir) for r in records]
  notes = [f"- {r['config']}: {note}" for r in records for note in r.get('notes', [])]
  extra = [f"- {r['config']}: extra bindings {'; '.join(r['extra_config'])}"
           for r in records if r['extra_config']]
  if notes or extra:
    lines += ['', 'Notes:', ''] + notes + extra
  return '\n'.join(lines) + '\n'


def render_page(records, curves_dir=CURVES_DIR, tuning_notes=None):
  """The whole of docs/results.md from `records` (tuning_notes: markdown appended)."""
  parts = [INTRO]
  for title in SECTIONS:
    chosen = [r for r in records if group(r['config']) == title]
    if chosen:
      parts.append(section(title, chosen, curves_dir))
  parts.append(ATARI)
  if tuning_notes:
    parts.append(tuning_notes.rstrip('\n') + '\n')
  return '\n'.join(parts)


def render_summary(records):
  """One line per config: target, seeds reaching it, median env steps, final eval."""
  lines = ['| config | target | seeds reaching target | median env steps to target | '
           'final eval (mean ± std) |', '|---|---|---|---|---|']
  for title in SECTIONS:
    for record in records:
      if group(record['config']) != title:
        continue
      r = row(record)
      final = _final(r)
      lines.append(f"| {record['config']} | {fmt_target(record['target'])} | "
                   f"{r['n_reached']}/{r['n_runs']} | {fmt_number(r['median_steps'])} | {final} |")
  return '\n'.join(lines) + '\n'


def read_tuning_notes(path=TUNING_NOTES):
  try:
    with open(path) as f:
      return f.read()
  except FileNotFoundError:
    return None


def stored_records(records_dir, order):
  """The stored records in the order of the config names `order` (others last, by name)."""
  order = {name: i for i, name in enumerate(order)}
  return sorted(learning_records.load_all(records_dir),
                key=lambda r: (order.get(r['config'], len(order)), r['config']))


def write_docs(records_dir, page, curves_dir, order, plotted=()):
  """Draws the `plotted` configs' stored curves, then renders `page` from every record."""
  records = stored_records(records_dir, order)
  os.makedirs(curves_dir, exist_ok=True)
  for record in records:
    if record['config'] not in plotted:
      continue
    # A failed run has no curve (learning.py's own plot leaves it out too).
    curves = [(s['curve']['env_steps'], s['curve']['eval_return'])
              for s in record['seeds'] if s.get('curve') and not s.get('failed')]
    summary = row(record)
    plot_curves([{'config': record['config'], 'target': record['target'],
                  'budget': record['budget'], 'curves': curves,
                  'n_reached': summary['n_reached'], 'n_runs': summary['n_runs']}],
                os.path.join(curves_dir, record['config'] + '.png'))
  text = render_page(records, curves_dir, read_tuning_notes())
  os.makedirs(os.path.dirname(os.path.abspath(page)), exist_ok=True)
  with open(page, 'w') as f:
    f.write(text)
  print(f'Wrote {page} from the {len(records)} records in {records_dir}')
