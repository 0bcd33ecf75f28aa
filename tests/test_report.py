"""rl.report on hand-made run folders: grouping and names, the tables' numbers, the plot."""
import os
import subprocess
import sys
import warnings

from matplotlib import image
import numpy as np
import pytest

import in_process
from rl import aggregate
from rl import report
from rl import report_figure
from report_helpers import captured_panels
from report_helpers import COMPILE_SECONDS
from report_helpers import make_run
from report_helpers import make_runs
from report_helpers import record
from report_helpers import write_run


@pytest.fixture
def runs(tmp_path):
  """Two groups (learning rates): three seeds, and two seeds four levels down."""
  return make_runs(tmp_path)


def _direct_ci(values, cut):
  """The percentile bootstrap CI of the mean cut by `cut` values a side, without rl.aggregate."""
  rng = np.random.default_rng(aggregate.SEED)
  picks = rng.integers(0, len(values), size=(aggregate.REPS, len(values)))
  resampled = np.sort(np.array(values)[picks], axis=1)
  stats = resampled[:, cut:len(values) - cut].mean(axis=1)
  low, high = np.percentile(stats, [2.5, 97.5])
  return f'[{low:.1f}, {high:.1f}]'


def _summary(text):
  """The summary table's lines: the report's second paragraph."""
  return text.split('\n\n')[1].splitlines()


def test_iqm_is_the_mean_of_the_middle_half():
  assert aggregate.iqm([100.0, 1, 7, 3, 5, 2, 6, 4]) == 4.5  # 3, 4, 5, 6 of 8 values
  assert aggregate.iqm([5.0, 1, 3, 2, 4]) == 3  # int(5 / 4) = 1 cut a side: 2, 3, 4
  assert aggregate.iqm([1.0, 4.0]) == 2.5  # nothing to cut from 2 or 3 values
  np.testing.assert_allclose(aggregate.iqm([[0, 10], [1, 20], [2, 30], [9, 40]]), [1.5, 25])
  assert aggregate.aggregate([100.0, 1, 7, 3], 'mean') == 27.75


def test_bootstrap_ci_matches_a_direct_computation_from_the_fixed_seed():
  values = [16.0, 1, 8, 2, 4]
  estimate = aggregate.estimate(values, 'iqm')
  assert estimate.value == pytest.approx(14 / 3) and estimate.n == 5  # (2 + 4 + 8) / 3
  assert f'[{estimate.low:.1f}, {estimate.high:.1f}]' == _direct_ci(values, cut=1)
  assert estimate.low < estimate.value < estimate.high
  assert aggregate.estimate(values, 'iqm') == estimate  # the same runs, the same report
  mean = aggregate.estimate(values, 'mean')
  assert mean.value == 6.2 and f'[{mean.low:.1f}, {mean.high:.1f}]' == _direct_ci(values, 0)
  # Below three runs no CI; missing values are not runs.
  assert aggregate.estimate([1.0, None, 3.0], 'iqm') == (2.0, None, None, 2)
  assert aggregate.estimate([None], 'iqm') is None


def test_summary_table_with_target(runs):
  text = report.make_report(runs, target=475)
  with open(os.path.join(runs, 'report.md')) as f:
    assert f.read() == text
  header, _, fast, slow = _summary(text)
  assert header == ('| group | env | runs (finished/total) | final eval_return, IQM [95% CI] | '
                    'best eval_return, IQM [95% CI] | env steps to 475 (median, runs reaching) '
                    '| seconds to 475 | training seconds | compile seconds |')
  # Finals 480, 490, 300: three values, none cut: 423.3; bests 500, 490, 300: 430. Each run
  # trains epochs 2 and 3 (4 s each: 8 s) after its 20 s first epoch. Seed 0 reaches 475 at
  # epoch 2 (200 steps, 4 s after the first epoch), seed 1 at epoch 3 (300, 8 s), seed 2 never.
  assert fast == (f'| fast | CartPole-v1 | 3/3 | 423.3 {_direct_ci([480.0, 490, 300], 0)} | '
                  f'430.0 {_direct_ci([500.0, 490, 300], 0)} | 250 (2/3) | 6.0 | 8.0 | 20.0 |')
  # Finals 7 and 3 (the null eval skipped), bests 7 and 3: two runs, no CI.
  assert slow == ('| slow/sweep/lr | CartPole-v1 | 2/2 | 5.0 (2 runs, no CI) | '
                  '5.0 (2 runs, no CI) | — (0/2) | — | 8.0 | 20.0 |')
  fast_section = text.split('## ')[1]
  assert fast_section.startswith('fast\n\n| binding | value |\n|---|---|\n'
                                 '| Adam.learning_rate | 0.1 |\n')
  assert '| fast/seed_0 | finished | 480.0 | 500.0 | 200 | 4.0 | 8.0 | 20.0 |' in fast_section
  assert '| fast/seed_2 | finished | 300.0 | 300.0 | — | — | 8.0 | 20.0 |' in fast_section


def test_without_target_the_target_columns_are_left_out(runs):
  text = report.make_report(runs)
  assert 'to 475' not in text
  assert _summary(text)[3].endswith('| 5.0 (2 runs, no CI) | 8.0 | 20.0 |')


def test_metric_train_and_aggregate_mean(runs):
  done = _report_cli(runs, '--metric=train', '--aggregate=mean', '--target=240')
  assert done.returncode == 0, done.stderr
  header, _, fast, _ = _summary(done.stdout)
  assert 'final train_return, mean [95% CI] | best train_return, mean [95% CI]' in header
  # train_return is half the eval's: finals 240, 245, 150; bests 250, 245, 150. Seed 0
  # reaches 240 at epoch 2, seed 1 at epoch 3.
  assert fast == (f'| fast | CartPole-v1 | 3/3 | 211.7 {_direct_ci([240.0, 245, 150], 0)} | '
                  f'215.0 {_direct_ci([250.0, 245, 150], 0)} | 250 (2/3) | 6.0 | 8.0 | 20.0 |')


def test_x_seconds_draws_training_seconds(runs, monkeypatch):
  calls = captured_panels(monkeypatch)
  report.make_report(runs, x='seconds', metric='train')
  [(panels, kwargs)] = calls
  assert kwargs['x_label'] == 'training seconds (compiling left out)'
  assert kwargs['y_label'] == 'train return (episodes ended in the epoch)'
  [(env, [fast, _])] = panels
  # The first epoch compiled: no seconds; then 4 s an epoch.
  assert env == 'CartPole-v1' and fast.finished[0] == ([0.0, 4.0, 8.0], [5.0, 250.0, 240.0])
  fig = report_figure.curves_figure(panels, **kwargs)
  assert fig.axes[0].get_xlabel() == 'training seconds (compiling left out)'
  report.make_report(runs, metric='eval')
  assert calls[1][0][0][1][0].finished[0] == ([100, 200, 300], [10.0, 500.0, 480.0])


def test_a_panel_per_env_named_groups_and_a_ci_band_from_three_runs(tmp_path, monkeypatch):
  for seed in (0, 1, 2):
    make_run(str(tmp_path / 'ppo_cartpole' / f'seed_{seed}'), seed, 0.1, [1.0, 2.0 + seed])
  for seed in (0, 1):
    make_run(str(tmp_path / 'ppo_pendulum' / f'seed_{seed}'), seed, 0.1, [-900.0, -800.0],
              env='Pendulum-v1')
  make_run(str(tmp_path / 'a2c_pendulum' / 'seed_0'), 0, 0.01, [-1000.0, -700.0],
            env='Pendulum-v1')
  calls = captured_panels(monkeypatch)
  text = report.make_report(str(tmp_path))
  assert [row.split(' | ')[:2] for row in _summary(text)[2:]] == [
      ['| a2c_pendulum', 'Pendulum-v1'], ['| ppo_pendulum', 'Pendulum-v1'],
      ['| ppo_cartpole', 'CartPole-v1']]
  [(panels, kwargs)] = calls
  with warnings.catch_warnings():
    warnings.simplefilter('error')
    fig = report_figure.curves_figure(panels, **kwargs)
    fig.canvas.draw()
  pendulum, cartpole = fig.axes
  assert (pendulum.get_title(), cartpole.get_title()) == ('Pendulum-v1', 'CartPole-v1')
  assert [t.get_text() for t in pendulum.get_legend().get_texts()] == [
      'a2c_pendulum (1 run, no CI)', 'ppo_pendulum (2 runs, no CI)']
  assert [t.get_text() for t in cartpole.get_legend().get_texts()] == [
      'ppo_cartpole (3 runs)']
  # Three runs get a CI band; fewer, their own thin lines instead.
  assert len(cartpole.collections) == 1 and not pendulum.collections
  assert pendulum.get_ylabel() == 'eval return (greedy)'
  assert pendulum.get_xlabel() == 'env steps'


def test_plot_is_written_with_size_and_dimensions(runs):
  report.make_report(runs, target=475)
  path = os.path.join(runs, 'learning_curves.png')
  assert os.path.getsize(path) > 10_000
  pixels = image.imread(path)
  assert pixels.ndim == 3 and pixels.shape[0] >= 300 and pixels.shape[1] >= 500
  assert pixels.std() > 0  # not a blank canvas


def test_without_matplotlib_the_report_is_written_and_the_plot_named_in_one_line(
    runs, monkeypatch, capsys):
  monkeypatch.setitem(sys.modules, 'matplotlib.pyplot', None)  # import fails as if absent
  text = report.make_report(runs, target=475)
  assert '| 3/3 |' in text and os.path.exists(os.path.join(runs, 'report.md'))
  assert not os.path.exists(os.path.join(runs, 'learning_curves.png'))
  [line] = capsys.readouterr().err.splitlines()
  assert 'learning_curves.png not drawn' in line and "pip install '.[plots]'" in line
  # A plot left by an earlier report does not stay beside the new table.
  plot = os.path.join(runs, 'learning_curves.png')
  with open(plot, 'wb') as f:
    f.write(b'an earlier plot')
  report.make_report(runs, target=475)
  assert not os.path.exists(plot)
  [line] = capsys.readouterr().err.splitlines()
  assert 'not drawn (the earlier one removed)' in line


def _report_cli(runs_dir, *flags):
  return in_process.run(runs_dir, *flags, program='rl.report')


def test_cli_prints_the_report_and_rejects_a_folder_without_runs(runs, tmp_path):
  ok = _report_cli(runs, '--target=475')
  assert ok.returncode == 0, ok.stderr
  assert '| 250 (2/3) | 6.0 | 8.0 | 20.0 |' in ok.stdout
  empty = tmp_path / 'empty'
  empty.mkdir()
  bad = _report_cli(str(empty))
  assert bad.returncode == 2
  assert len(bad.stderr.strip().splitlines()) == 1 and 'no metrics.jsonl' in bad.stderr


@pytest.mark.parametrize('flag', ['--metric=loss', '--x=epochs', '--aggregate=median'])
def test_a_bad_flag_is_one_line(runs, flag):
  bad = _report_cli(runs, flag)
  assert bad.returncode == 2 and not bad.stdout
  [line] = bad.stderr.strip().splitlines()
  assert line.startswith(f'rl.report: error: flag {flag}: value should be one of')
  assert not os.path.exists(os.path.join(runs, 'report.md'))


def test_the_command_says_a_bad_flag_in_one_line(runs):
  # absl's own parser says it in two lines; rl.report's, as rl.run's, in one.
  bad = subprocess.run([sys.executable, '-m', 'rl.report', runs, '--aggregate=median'],
                       capture_output=True, text=True, check=False)
  assert bad.returncode == 2 and not bad.stdout
  [line] = bad.stderr.strip().splitlines()
  assert "flag --aggregate=median: value should be one of <iqm|mean>" in line
  assert '--helpshort' in line


def test_unfinished_runs_are_listed_and_drawn_dashed(tmp_path, monkeypatch):
  fast = str(tmp_path / 'fast' / 'seed_')
  make_run(fast + '0', 0, 0.1, [10.0, 300.0, 480.0], n_epochs=3, stop_at_return=475)
  # Stopped at train_rl.stop_at_return: finished at epoch 2 of 3.
  make_run(fast + '1', 1, 0.1, [20.0, 490.0], n_epochs=3, stop_at_return=475)
  # Interrupted at epoch 1 of 3: left out of the aggregate, its eval would pull it down.
  make_run(fast + '2', 2, 0.1, [10.0], n_epochs=3, stop_at_return=475)
  # A group none of whose runs finished.
  make_run(str(tmp_path / 'slow' / 'seed_0'), 0, 0.01, [5.0, 6.0], n_epochs=3,
            stop_at_return=475)
  calls = captured_panels(monkeypatch)
  text = report.make_report(str(tmp_path))
  _, _, fast_row, slow_row = _summary(text)
  # Finals 480 and 490 (bests the same): the interrupted run's 10 left out.
  assert fast_row == ('| fast | CartPole-v1 | 2/3 | 485.0 (2 runs, no CI) | '
                      '485.0 (2 runs, no CI) | 6.0 | 20.0 |')
  assert slow_row == '| slow | CartPole-v1 | 0/1 | — | — | — | — |'
  assert '| fast/seed_2 | unfinished: epoch 1 of 3 | 10.0 | 10.0 | 0.0 | 20.0 |' in text
  assert '| slow/seed_0 | unfinished: epoch 2 of 3 | 6.0 | 6.0 | 4.0 | 20.0 |' in text
  [(panels, kwargs)] = calls
  [(_, [fast_curves, slow_curves])] = panels
  assert (len(fast_curves.finished), fast_curves.unfinished) == (2, [([100], [10.0])])
  assert (slow_curves.finished, slow_curves.unfinished) == ([], [([100, 200], [5.0, 6.0])])
  fig = report_figure.curves_figure(panels, **kwargs)
  ax, = fig.axes
  assert [t.get_text() for t in ax.get_legend().get_texts()] == [
      'fast (2 runs, no CI)', 'fast: 1 unfinished', 'slow: 1 unfinished']
  dashed = [line for line in ax.get_lines() if line.get_linestyle() == '--']
  assert [list(line.get_ydata()) for line in dashed] == [[10.0], [5.0, 6.0]]


def test_compile_seconds_are_reported_apart_from_training(tmp_path):
  def run(name, records):
    write_run(str(tmp_path / name), f"RLTask.env = '{name}'\ntrain_rl.n_epochs = 4\n", records)

  # Without time_compile the first epoch's seconds (20) are the compile time.
  run('plain', [record(1, 100, 1.0, COMPILE_SECONDS)]
      + [record(epoch, 100 * epoch, 1.0) for epoch in (2, 3, 4)])
  # With it, every epoch that logs it compiled (here also the first after a
  # resume): 30 + 9 s of compiling, and 2 x 4 s of training.
  run('logged', [{**record(1, 100, 1.0, COMPILE_SECONDS), 'time_compile': 30.0},
                 record(2, 200, 1.0),
                 {**record(3, 300, 1.0, (6.0, 2.0, 1.0)), 'time_compile': 9.0},
                 record(4, 400, 500.0)])
  text = report.make_report(str(tmp_path), target=475)
  assert '| logged | finished | 500.0 | 500.0 | 400 | 8.0 | 8.0 | 39.0 |' in text
  assert '| plain | finished | 1.0 | 1.0 | — | — | 12.0 | 20.0 |' in text
  assert '| 400 (1/1) | 8.0 | 8.0 | 39.0 |' in _summary(text)[2]
