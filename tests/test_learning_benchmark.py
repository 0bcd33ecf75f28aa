"""The learning benchmark's aggregation, on hand-made metrics records."""
import json
import os
import re
import subprocess
import sys

import pytest

import benchmark_scripts

learning = benchmark_scripts.load('learning', 'learning_benchmark')
_PATH = learning.__file__


def _record(epoch, env_steps, eval_return, seconds=(1.0, 2.0, 0.5)):
  collect, train, evaluate = seconds
  return {'epoch': epoch, 'env_steps': env_steps, 'eval_return': eval_return,
          'time_collect': collect, 'time_train': train, 'time_eval': evaluate}


def test_time_to_target_first_reaching_epoch_and_cumulative_wall():
  records = [_record(1, 100, 10.0), _record(2, 200, None), _record(3, 300, 500.0),
             _record(4, 400, 480.0)]
  result = learning.time_to_target(records, target=475, budget=1000)
  # Epoch 3 is the first at or above 475; the null eval of epoch 2 is skipped
  # but its time still counts: 3 epochs of 3.5 s.
  assert result == {'reached': True, 'epoch': 3, 'env_steps': 300, 'wall_seconds': 10.5}


def test_time_to_target_counts_equal_as_reached_and_ignores_record_order():
  records = [_record(2, 200, 475.0), _record(1, 100, 0.0)]
  result = learning.time_to_target(records, target=475, budget=200)
  assert result['reached'] and result['epoch'] == 2 and result['env_steps'] == 200


def test_time_to_target_beyond_budget_is_not_reached():
  records = [_record(1, 100, 10.0), _record(2, 300, 500.0)]
  assert learning.time_to_target(records, target=475, budget=250) == {
      'reached': False, 'epoch': None, 'env_steps': None, 'wall_seconds': None}


def test_time_to_target_negative_targets_and_nan():
  records = [_record(1, 100, float('nan')), _record(2, 200, -300.0), _record(3, 300, -240.0)]
  assert learning.time_to_target(records, target=-250, budget=1000)['epoch'] == 3


def test_final_eval_skips_trailing_nulls():
  records = [_record(1, 100, 5.0), _record(2, 200, 7.0), _record(3, 300, None)]
  assert learning.final_eval(records) == 7.0
  assert learning.final_eval([_record(1, 100, None)]) is None


def test_summarize_config_counts_failures_and_takes_medians_of_reaching_seeds():
  target, budget = 475, 1000
  runs = [
      learning.summarize_run([_record(1, 100, 480.0)], target, budget),
      learning.summarize_run([_record(1, 100, 0.0), _record(2, 300, 500.0)], target, budget),
      learning.summarize_run([_record(1, 100, 100.0)], target, budget),  # never reaches
      learning.summarize_run(None, target, budget),  # the process failed
  ]
  row = learning.summarize_config('x', target, budget, runs)
  assert (row['n_reached'], row['n_runs']) == (2, 4)
  assert row['median_steps'] == 200  # median of 100 and 300
  assert row['median_seconds'] == pytest.approx(5.25)  # median of 3.5 and 7.0
  # Final over the three seeds that logged an eval: 480, 500, 100.
  assert row['n_final'] == 3
  assert row['final_mean'] == pytest.approx(360.0)
  assert row['final_std'] == pytest.approx((((120 ** 2) + (140 ** 2) + (260 ** 2)) / 3) ** 0.5)
  # 475 - 47.5 = 427.5: 480 and 500 hold, 100 (and the failed run) do not.
  assert row['final_min'] == 100.0
  assert row['n_holding'] == 2


def test_holding_is_within_ten_percent_of_the_target_either_sign():
  assert learning.summarize_config('c', 475, 1000, [
      learning.summarize_run([_record(1, 100, 427.5)], 475, 1000)])['n_holding'] == 1
  assert learning.summarize_config('c', 475, 1000, [
      learning.summarize_run([_record(1, 100, 427.4)], 475, 1000)])['n_holding'] == 0
  # A negative target: -250 - 25 = -275.
  assert learning.summarize_config('p', -250, 1000, [
      learning.summarize_run([_record(1, 100, -275.0)], -250, 1000),
      learning.summarize_run([_record(1, 100, -276.0)], -250, 1000)])['n_holding'] == 1


def test_format_table_rows_and_dashes_for_missing():
  rows = [
      learning.summarize_config('a', 475, 300_000, [
          learning.summarize_run([_record(1, 12_000, 500.0)], 475, 300_000)]),
      learning.summarize_config('b', -250, 500_000, [learning.summarize_run(None, -250, 500_000)]),
  ]
  lines = learning.format_table(rows).splitlines()
  assert len(lines) == 4
  assert lines[0].count('|') == 10 and lines[1] == '|' + '---|' * 9
  assert 'final eval at budget' in lines[0]
  assert lines[2] == '| a | 475 | 300,000 | 1/1 | 12,000 | 3.5 | 500.0 ± 0.0 | 500.0 | 1/1 |'
  assert lines[3] == '| b | -250 | 500,000 | 0/1 | — | — | — | — | — |'


def test_a_target_with_a_decimal_keeps_it_in_the_tables():
  # A target taken from another framework's mean return (6.4) must not print as 6.
  row = learning.summarize_config('m', 6.4, 5_000_000, [
      learning.summarize_run([_record(1, 500_000, 6.0)], 6.4, 5_000_000)])
  assert learning.format_table([row]).splitlines()[2].startswith('| m | 6.4 | 5,000,000 | 0/1 |')


def test_aggregate_curves_interpolates_on_the_range_every_seed_covers():
  curves = [([0, 100, 200], [0.0, 100.0, 200.0]),
            ([50, 150], [10.0, 10.0])]
  grid, mean, low, high = learning.aggregate_curves(curves, n_points=3)
  assert grid == [50, 100, 150]
  # Seed 0 is the line y = x; seed 1 is flat at 10.
  assert mean == pytest.approx([30.0, 55.0, 80.0])
  assert low == pytest.approx([10.0, 10.0, 10.0])
  assert high == pytest.approx([50.0, 100.0, 150.0])


def test_aggregate_curves_empty_without_common_range():
  assert learning.aggregate_curves([]) == ([], [], [], [])
  assert learning.aggregate_curves([([0, 10], [1.0, 2.0]), ([], [])]) == ([], [], [], [])
  assert learning.aggregate_curves([([0, 10], [1.0, 2.0]), ([20, 30], [1.0, 2.0])]) == (
      [], [], [], [])


def test_eval_curve_drops_null_evals():
  records = [_record(2, 200, None), _record(1, 100, 3.0), _record(3, 300, 4.0)]
  assert learning.eval_curve(records) == ([100, 300], [3.0, 4.0])


def test_stopped_short_only_for_finished_runs_that_missed_before_the_budget():
  short = learning.summarize_run([_record(1, 100, 10.0)], 475, 1000)
  used_up = learning.summarize_run([_record(1, 1200, 10.0)], 475, 1000)
  reached = learning.summarize_run([_record(1, 100, 500.0)], 475, 1000)
  failed = learning.summarize_run(None, 475, 1000)
  assert short['last_env_steps'] == 100
  assert [learning.stopped_short(r, 1000) for r in (short, used_up, reached, failed)] == [
      True, False, False, False]


def test_process_seconds_are_those_of_runs_timed_from_their_start(tmp_path, monkeypatch):
  """A fresh run's cold and warm seconds are kept; a run that already existed (resumed)
  loses any seconds an earlier benchmark left, rather than passing them off as its own."""
  calls = []

  def fake_run(config_files, folder, seed, extra_config, log_path, compilation_cache_dir=None):
    calls.append((folder, compilation_cache_dir))
    os.makedirs(folder, exist_ok=True)
    return None
  monkeypatch.setattr(learning.learning_runs, 'run_rl_logged', fake_run)
  out = str(tmp_path)
  error, _, _ = learning.learning_runs.run_one('ppo_cartpole', 0, out, [], process_wall=True)
  assert error is None
  folder = learning.run_dir(out, 'ppo_cartpole', 0)
  # Cold into the run folder, then warm into its _warm twin, on the same cache.
  assert calls == [(folder, folder + '.compilation_cache'),
                   (folder + '_warm', folder + '.compilation_cache')]
  assert set(learning.process_seconds(out, 'ppo_cartpole', 0)) == {'cold', 'warm'}

  # The folder exists now.
  learning.learning_runs.run_one('ppo_cartpole', 0, out, [], process_wall=True)
  assert learning.process_seconds(out, 'ppo_cartpole', 0) is None


# -- records and the rendered results page --------------------------------------------

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
results_page = learning.results_page
learning_records = learning.learning_records
TRANSCRIBED = 'transcribed from docs/results.md at abc1234'


def _seed(seed, steps, wall, final, last=None, source='run', commit='f' * 40, date='2026-12-03'):
  return {'seed': seed, 'failed': False, 'reached': steps is not None,
          'env_steps_to_target': steps, 'epoch_to_target': None, 'wall_seconds_to_target': wall,
          'final_eval': final, 'last_env_steps': last, 'curve': None, 'commit': commit,
          'dirty': False, 'date': date + 'T04:00:00Z', 'source': source}


def _fixture():
  """A measured classic-control record and a transcribed MinAtar one."""
  run = {'config': 'x_cartpole', 'target': 475, 'budget': 1000, 'stop_at_target': True,
         'extra_config': [], 'commands': ['python benchmarks/learning.py --configs x_cartpole'],
         'notes': [], 'seeds': [_seed(0, 300, 2.0, 480.0), _seed(1, None, None, 100.0, 1000),
                                _seed(2, 500, 4.0, 500.0)]}
  old = dict(commit='b' * 40, date='2026-12-01', source=TRANSCRIBED)
  copied = {'config': 'y_breakout_jax', 'target': 7, 'budget': 1_000_000,
            'stop_at_target': False, 'extra_config': [], 'commands': ['python -m rl.run y'],
            'notes': ['best eval 16.2; 7.0.'],
            'seeds': [_seed(0, 150_528, None, 15.5, **old), _seed(1, 401_408, None, 6.9, **old)]}
  return [run, copied]


def test_page_rows_from_records(tmp_path):
  (tmp_path / 'x_cartpole.png').write_bytes(b'')
  run, copied = _fixture()
  # Seed 1 misses: 2/3 reach, median of 300 and 500 steps and of 2 and 4 s; the finals
  # 480, 100, 500 have mean 360 and population std sqrt(101600 / 3) = 184.03; 480 and 500
  # are at least 475 - 47.5.
  assert results_page.table_line(run, str(tmp_path)) == (
      '| x_cartpole | 475 | 1,000 | 2/3 (seeds 0-2) | 300; —; 500 | 400 | 3.0 | '
      '360.0 ± 184.0 | target | 2/3 | [curves](curves/x_cartpole.png) | run |')
  # Copied figures have no seconds and no curve image; 15.5 and 6.9 both hold 7 - 0.7.
  assert results_page.table_line(copied, str(tmp_path)) == (
      '| y_breakout_jax | 7 | 1,000,000 | 2/2 (seeds 0, 1) | 150,528; 401,408 | 275,968 | — | '
      '11.2 ± 4.3 | budget | 2/2 | — | transcribed |')


def test_page_has_a_table_per_group_with_its_commits_and_dates(tmp_path):
  page = results_page.render_page(_fixture(), str(tmp_path), '## Tuning\n\nprose\n')
  classic = page.index('## Classic control')
  real = page.index('## Real workloads')
  assert 'do not edit' in page.lower() and 'python benchmarks/learning.py --render_only' in page
  assert classic < page.index('| x_cartpole |') < real < page.index('| y_breakout_jax |')
  assert page.index('- `fffffff` (2026-12-03): x_cartpole') < real
  assert page.index(f'- `bbbbbbb` (2026-12-01, {TRANSCRIBED}): y_breakout_jax') > real
  assert '- y_breakout_jax: best eval 16.2; 7.0.' in page
  assert page.endswith('## Tuning\n\nprose\n')


def test_summary_one_line_per_config():
  assert results_page.render_summary(_fixture()).splitlines()[2:] == [
      '| x_cartpole | 475 | 2/3 | 400 | 360.0 ± 184.0 |',
      '| y_breakout_jax | 7 | 2/2 | 275,968 | 11.2 ± 4.3 |']


def test_store_merges_seeds_of_the_same_measurement_and_replaces_another(tmp_path):
  run = _fixture()[0]
  learning_records.store(str(tmp_path), run)
  again = {**run, 'commands': ['again'], 'seeds': [_seed(1, 700, 1.0, 490.0), _seed(3, 600, 1.0, 480.0)]}
  merged = learning_records.store(str(tmp_path), again)
  assert [(s['seed'], s['env_steps_to_target']) for s in merged['seeds']] == [
      (0, 300), (1, 700), (2, 500), (3, 600)]
  assert merged['commands'] == [run['commands'][0], 'again']
  other_target = learning_records.store(str(tmp_path), {**again, 'target': 500})
  assert [s['seed'] for s in other_target['seeds']] == [1, 3]
  assert learning_records.load(str(tmp_path), 'x_cartpole') == other_target


def test_write_docs_stores_stamped_records_curves_and_the_page(tmp_path, monkeypatch):
  """A run with --write_docs: each seed's record carries its curve and the commit it started at."""
  def fake_run(config_files, folder, seed, extra_config, log_path, compilation_cache_dir=None):
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, 'metrics.jsonl'), 'w') as f:
      for record in (_record(1, 5_000, 100.0 + seed), _record(2, 10_000, 480.0)):
        f.write(json.dumps(record) + '\n')
    return None
  monkeypatch.setattr(learning.learning_runs, 'run_rl_logged', fake_run)
  records, page, curves = tmp_path / 'records', tmp_path / 'results.md', tmp_path / 'curves'
  assert learning.main(['--configs', 'ppo_cartpole', '--seeds', '0,1', '--stop_at_target',
                        '--parallel', '1', '--output_dir', str(tmp_path / 'runs'),
                        '--write_docs', '--records_dir', str(records),
                        '--results_page', str(page), '--curves_dir', str(curves)]) == 0
  stored = learning_records.load(str(records), 'ppo_cartpole')
  head = learning_records.git_stamp()['commit']
  assert [(s['seed'], s['env_steps_to_target'], s['final_eval'], s['commit'], s['source'])
          for s in stored['seeds']] == [(0, 10_000, 480.0, head, 'run'),
                                        (1, 10_000, 480.0, head, 'run')]
  assert stored['seeds'][1]['curve'] == {'env_steps': [5_000, 10_000],
                                         'eval_return': [101.0, 480.0]}
  assert stored['commands'][0].startswith('python benchmarks/learning.py --configs ppo_cartpole')
  assert (curves / 'ppo_cartpole.png').stat().st_size > 0
  assert '| ppo_cartpole | 475 | 100,000 | 2/2 (seeds 0, 1) | 10,000; 10,000 | 10,000 |' in (
      page.read_text())


def test_render_only_and_summary_from_the_command_line(tmp_path):
  for record in _fixture():
    learning_records.store(str(tmp_path), record)
  page = tmp_path / 'page.md'
  flags = ['--records_dir', str(tmp_path), '--results_page', str(page)]
  subprocess.run([sys.executable, _PATH, '--render_only'] + flags, check=True,
                 capture_output=True)
  assert page.read_text() == results_page.render_page(
      _fixture(), results_page.CURVES_DIR, results_page.read_tuning_notes())
  summary = subprocess.run([sys.executable, _PATH, '--summary'] + flags, check=True,
                           capture_output=True, text=True).stdout
  assert summary == results_page.render_summary(_fixture())


def test_results_page_is_the_render_of_the_stored_records():
  """docs/results.md is generated: a hand edit (or a record without its render) fails here."""
  records = results_page.stored_records(learning_records.RECORDS_DIR, learning.REGISTRY)
  expected = results_page.render_page(records, results_page.CURVES_DIR,
                                      results_page.read_tuning_notes())
  with open(results_page.PAGE) as f:
    assert f.read() == expected, (
        'docs/results.md differs from its records; run: python benchmarks/learning.py --render_only')


def test_stored_records_match_the_registry():
  for record in learning_records.load_all(learning_records.RECORDS_DIR):
    assert (record['target'], record['budget']) == learning.REGISTRY[record['config']]
    for seed in record['seeds']:
      assert seed['commit'] and seed['date']
      assert seed['source'] == 'run' or seed['source'].startswith('transcribed from ')


def test_render_only_without_records_or_with_a_broken_one_is_one_line(tmp_path):
  page = tmp_path / 'page.md'
  command = [sys.executable, _PATH, '--render_only', '--records_dir', str(tmp_path),
             '--results_page', str(page)]
  empty = subprocess.run(command, capture_output=True, text=True)
  assert empty.returncode == 2 and not page.exists()
  assert empty.stderr.splitlines() == [
      f'error: no records (<config>.json) in {tmp_path}; run benchmarks/learning.py with '
      '--write_docs first, or pass --records_dir']
  (tmp_path / 'x_cartpole.json').write_text('{"config": ')
  broken = subprocess.run(command, capture_output=True, text=True)
  assert broken.returncode == 2 and not page.exists()
  assert len(broken.stderr.splitlines()) == 1
  assert broken.stderr.startswith(f"error: cannot read the record {tmp_path / 'x_cartpole.json'}")


@pytest.mark.parametrize('config, section', [
    ('ppo_cartpole', 'CLASSIC_CONTROL'), ('ppo_cartpole_jax', 'CLASSIC_CONTROL'),
    ('ppo_joint_lunarlander', 'REAL_WORKLOADS'), ('ppo_minatar_breakout_jax', 'REAL_WORKLOADS'),
    ('ppo_cartpole_novel', 'SEQUENCE_MODELS'), ('ppo_cartpole_transformer', 'SEQUENCE_MODELS'),
    ('ppo_joint_lunarlander_transformer', 'SEQUENCE_MODELS')])
def test_each_config_has_its_section_of_the_page(config, section):
  """The memory task's MLP baseline sits in one table with the Transformers it is compared to."""
  assert results_page.group(config) == getattr(results_page, section)


def test_readme_and_config_headers_quote_the_stored_records():
  """The README's results table is `learning.py --summary`'s, and every median a config's
  header quotes is its record's: the figures live in one place, benchmarks/results."""
  root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
  records = results_page.stored_records(learning_records.RECORDS_DIR, learning.REGISTRY)
  with open(os.path.join(root, 'README.md')) as f:
    assert results_page.render_summary(records) in f.read(), (
        "README.md's results table differs from the records; paste the output of "
        'python benchmarks/learning.py --summary')
  quoted = 0
  for record in records:
    path = os.path.join(root, 'configs', record['config'] + '.gin')
    with open(path) as f:
      header = ' '.join(line for line in f.read().splitlines() if line.startswith('#'))
    median = results_page.row(record)['median_steps']
    for number in re.findall(r'median(?: of)? ([\d,]+\d)', header):
      assert int(number.replace(',', '')) == median, (record['config'], number, median)
      quoted += 1
  assert quoted >= 10


# A list of per-seed figures in a config header: '5,120, 30,720 and 17,920'.
_NUMBER = r'-?\d[\d,]*(?:\.\d+)?'
_SEED_LIST = re.compile(rf'({_NUMBER}(?:, {_NUMBER})*,? and {_NUMBER})')
# The sentences of a header that give the record's results (tuning notes about
# other settings are left to the prose).
_RESULT_SENTENCE = re.compile(r'(?:Reaches|Ends|--seeds \d[\d,]*) .*?\((?:docs/results|the Zoo)')


def _seed_lists(sentence):
  for match in _SEED_LIST.finditer(sentence):
    yield [float(n.replace(',', '')) for n in re.split(r',? and |, ', match.group(1))]


def test_config_headers_quote_each_seeds_figures_from_the_stored_records():
  """Every list of per-seed figures in a config's results sentence is its record's: the env
  steps at which each seed first reached the target, or each seed's final eval (to 0.1)."""
  root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
  records = results_page.stored_records(learning_records.RECORDS_DIR, learning.REGISTRY)
  checked, wrong = 0, []
  for record in records:
    with open(os.path.join(root, 'configs', record['config'] + '.gin')) as f:
      header = ' '.join(line[1:].strip() for line in f.read().splitlines()
                        if line.startswith('#'))
    seeds = record['seeds']
    steps = [float(s['env_steps_to_target']) for s in seeds if s.get('reached')]
    finals = [round(s['final_eval'], 1) for s in seeds]
    for sentence in _RESULT_SENTENCE.findall(header):
      for figures in _seed_lists(sentence):
        if len(figures) != len(seeds):
          continue
        if figures not in (steps, finals):
          wrong.append((record['config'], figures, steps, finals))
        checked += 1
  assert not wrong, wrong
  assert checked >= 10, checked
