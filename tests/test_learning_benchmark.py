"""The learning benchmark's aggregation, on hand-made metrics records."""
import importlib.util
import os

import pytest

# benchmarks/ is a folder of scripts, not a package: load the file directly.
_PATH = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                     'benchmarks', 'learning.py')
_spec = importlib.util.spec_from_file_location('learning_benchmark', _PATH)
learning = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(learning)


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
  monkeypatch.setattr(learning, 'run_rl_logged', fake_run)
  out = str(tmp_path)
  error, _, _ = learning.run_one('ppo_cartpole', 0, out, [], process_wall=True)
  assert error is None
  folder = learning.run_dir(out, 'ppo_cartpole', 0)
  # Cold into the run folder, then warm into its _warm twin, on the same cache.
  assert calls == [(folder, folder + '.compilation_cache'),
                   (folder + '_warm', folder + '.compilation_cache')]
  assert set(learning.process_seconds(out, 'ppo_cartpole', 0)) == {'cold', 'warm'}

  learning.run_one('ppo_cartpole', 0, out, [], process_wall=True)  # the folder exists now
  assert learning.process_seconds(out, 'ppo_cartpole', 0) is None
