"""rl.report on hand-made run folders: grouping, the table's numbers, the plot."""
import json
import os
import subprocess
import sys

from matplotlib import image
import pytest

from rl import report

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _record(epoch, env_steps, eval_return, seconds=(1.0, 2.0, 0.5)):
  collect, train, evaluate = seconds
  return {'epoch': epoch, 'env_steps': env_steps, 'eval_return': eval_return,
          'time_collect': collect, 'time_train': train, 'time_eval': evaluate}


def _make_run(folder, seed, learning_rate, evals):
  """A run folder: config.gin and metrics.jsonl with evals at 100, 200, ... env steps."""
  os.makedirs(folder)
  with open(os.path.join(folder, 'config.gin'), 'w') as f:
    f.write('# Parameters for Adam:\n'
            f'Adam.learning_rate = {learning_rate}\n'
            'RLTask.env = \'CartPole-v1\'\n'
            f'RLTask.seed = {seed}\n')
  with open(os.path.join(folder, 'metrics.jsonl'), 'w') as f:
    for i, value in enumerate(evals):
      f.write(json.dumps(_record(i + 1, 100 * (i + 1), value)) + '\n')


@pytest.fixture
def runs(tmp_path):
  """Two groups (learning rates) x two seeds; the second group one level deeper."""
  _make_run(str(tmp_path / 'fast' / 'seed_0'), 0, 0.1, [10.0, 500.0, 480.0])
  _make_run(str(tmp_path / 'fast' / 'seed_1'), 1, 0.1, [20.0, 100.0, 490.0])
  _make_run(str(tmp_path / 'slow' / 'sweep' / 'seed_0'), 0, 0.01, [5.0, 6.0, 7.0])
  # A null eval (no episode ended) is skipped, not taken as the final value.
  _make_run(str(tmp_path / 'slow' / 'sweep' / 'seed_1'), 1, 0.01, [1.0, 3.0, None])
  return str(tmp_path)


def test_runs_are_found_up_to_three_levels_and_grouped_by_config_but_seed(runs):
  found = report.find_runs(runs)
  assert [os.path.relpath(r, runs) for r in found] == [
      'fast/seed_0', 'fast/seed_1', 'slow/sweep/seed_0', 'slow/sweep/seed_1']
  groups = report.group_runs(found, 'x')
  # Named by the one binding that differs between groups (not env, not seed).
  assert [(name, len(members)) for name, members in groups] == [
      ('Adam.learning_rate=0.1', 2), ('Adam.learning_rate=0.01', 2)]


def test_report_numbers_with_target(runs):
  text = report.make_report(runs, target=475)
  with open(os.path.join(runs, 'report.md')) as f:
    assert f.read() == text
  fast, slow = text.split('## ')[1:3]
  # Finals 480 and 490: mean 485, population std 5; best 500. Seed 0 reaches
  # 475 at epoch 2 (200 steps, 2 x 3.5 s), seed 1 at epoch 3 (300, 10.5 s).
  assert fast.startswith('Adam.learning_rate=0.1\n')
  assert '| 2 | 485.0 ± 5.0 | 500.0 | 2/2 | 250 | 8.8 |' in fast
  assert 'fast/seed_0, fast/seed_1' in fast
  # Finals 7 and 3 (the null eval skipped): 5 ± 2; best 7; no run reaches 475.
  assert '| 2 | 5.0 ± 2.0 | 7.0 | 0/2 | — | — |' in slow
  assert 'runs reaching 475' in text


def test_group_summary_values(runs):
  records = [[_record(1, 100, 10.0), _record(2, 200, 500.0), _record(3, 300, 480.0)],
             [_record(1, 100, 20.0), _record(2, 200, 100.0), _record(3, 300, 490.0)]]
  row = report.summarize_group('g', records, target=475)
  assert (row['n_runs'], row['final_mean'], row['final_std'], row['best']) == (2, 485, 5, 500)
  assert (row['n_reached'], row['median_steps'], row['median_seconds']) == (2, 250, 8.75)


def test_without_target_the_target_columns_are_left_out(runs):
  text = report.make_report(runs)
  assert 'reaching' not in text.split('\n\n')[2]
  assert '| 2 | 485.0 ± 5.0 | 500.0 |' in text


def test_plot_is_written_with_size_and_dimensions(runs):
  report.make_report(runs, target=475)
  path = os.path.join(runs, 'learning_curves.png')
  assert os.path.getsize(path) > 10_000
  pixels = image.imread(path)
  assert pixels.ndim == 3 and pixels.shape[0] >= 300 and pixels.shape[1] >= 500
  assert pixels.std() > 0  # not a blank canvas


def test_one_run_folder_is_its_own_group(tmp_path):
  run_dir = str(tmp_path / 'only')
  _make_run(run_dir, 0, 0.1, [1.0, 2.0])
  text = report.make_report(run_dir)
  assert '## only\n' in text and '| 1 | 2.0 ± 0.0 | 2.0 |' in text
  assert os.path.isfile(os.path.join(run_dir, 'learning_curves.png'))


def test_cli_prints_the_report_and_rejects_a_folder_without_runs(runs, tmp_path):
  ok = subprocess.run([sys.executable, '-m', 'rl.report', runs, '--target=475'], cwd=ROOT,
                      capture_output=True, text=True, timeout=120)
  assert ok.returncode == 0, ok.stderr
  assert '| 2 | 485.0 ± 5.0 | 500.0 | 2/2 | 250 | 8.8 |' in ok.stdout
  empty = tmp_path / 'empty'
  empty.mkdir()
  bad = subprocess.run([sys.executable, '-m', 'rl.report', str(empty)], cwd=ROOT,
                       capture_output=True, text=True, timeout=120)
  assert bad.returncode == 2
  assert len(bad.stderr.strip().splitlines()) == 1 and 'no metrics.jsonl' in bad.stderr
