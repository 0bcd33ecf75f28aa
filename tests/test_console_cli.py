"""What `python -m rl.run` prints, end to end: the opening lines, a throttled console, progress
lines while the first epoch runs, the closing lines; and the small one-line answers."""
import os
import subprocess
import sys

import in_process
from rl import experiment
from rl.metrics import read_metrics
from run_helpers import REINFORCE
from run_helpers import ROOT
from run_helpers import TINY
from run_helpers import assert_one_line_error
from run_helpers import cli
from run_helpers import cli_process
from run_helpers import gated_config

# Every third epoch evaluates; the console's interval is longer than any test,
# so which epochs it shows does not depend on the machine's speed.
QUIET = TINY + ['PolicyGradientTrainer.eval_every = 3', 'console.every_seconds = 1000']


def flags(out, bindings):
  return [f'--config_file={REINFORCE}', f'--output_dir={out}',
          *[f'--config={b}' for b in bindings]]


def epoch_numbers(lines):
  return [int(l.split()[1].split('/')[0]) for l in lines if l.startswith('epoch ') and ' | ' in l]


def test_the_first_line_comes_before_jax_is_imported(tmp_path):
  # A stand-in jax that says when it is imported, and stops the process there.
  (tmp_path / 'jax').mkdir()
  (tmp_path / 'jax' / '__init__.py').write_text(
      "print('jax is being imported', flush=True)\nraise SystemExit(3)\n")
  env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(tmp_path), ROOT]))
  result = subprocess.run([sys.executable, '-m', 'rl.run', f'--config_file={REINFORCE}',
                           f'--output_dir={tmp_path / "run"}', '--config=RLTask.seed = 1'],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
  assert result.returncode == 3, result.stderr
  assert result.stdout.splitlines() == [
      f'rl.run: {REINFORCE} with 1 binding -> {tmp_path / "run"}; importing JAX ...',
      'jax is being imported']


def test_console_is_throttled_log_keeps_every_epoch_and_the_end_says_what_next(tmp_path):
  out = tmp_path / 'run'
  result = cli(*flags(out, QUIET + ['train_rl.n_epochs = 6']))
  assert result.returncode == 0, result.stderr
  lines = result.stdout.splitlines()
  assert lines[0].startswith(f'rl.run: {REINFORCE} with ')
  assert lines[1] == f'Starting {out}: CartPole-v1, trainer PolicyGradientTrainer, 6 epochs.'
  assert lines[2].startswith('epoch 1/6: compiling acting and training')
  # The first epoch, the evaluating ones (3, 6) and the last; the others in log.txt only.
  assert epoch_numbers(lines) == [1, 3, 6]
  log = (out / 'log.txt').read_text().splitlines()
  assert epoch_numbers([l.split(' ', 2)[2] for l in log]) == [1, 2, 3, 4, 5, 6]
  assert [r['epoch'] for r in read_metrics(out)] == [1, 2, 3, 4, 5, 6]
  steps = read_metrics(out)[-1]['env_steps']
  assert lines[-5].startswith(f'Training is done: 6 epochs, {steps:,} env steps, eval return ')
  # The next steps a command a line, each pasteable on its own.
  assert lines[-4:] == ['Next:', f'  python -m rl.evaluate --output_dir={out}',
                        f'  tensorboard --logdir {out}', f'  python -m rl.report {out}']
  assert log[-4].endswith('Next:') and log[-3:] == lines[-3:]

  # A rerun says the run is complete, and nothing else happens.
  again = cli(*flags(out, QUIET + ['train_rl.n_epochs = 6']))
  assert again.returncode == 0, again.stderr
  again_lines = again.stdout.splitlines()
  assert again_lines[1] == (f'{out} is already complete: 6/6 epochs (CartPole-v1, trainer '
                            'PolicyGradientTrainer); nothing to train.')
  assert 'Resuming' not in again.stdout and 'Training is done' not in again.stdout
  assert again_lines[-4:] == lines[-4:] and len(again_lines) == 6

  # --verbose shows every epoch (8 would be left out otherwise).
  longer = cli(*flags(out, QUIET + ['train_rl.n_epochs = 10']), '--verbose')
  assert longer.returncode == 0, longer.stderr
  assert f'Resuming {out} from epoch 6/10: CartPole-v1' in longer.stdout
  assert epoch_numbers(longer.stdout.splitlines()) == [7, 8, 9, 10]


def test_progress_lines_while_the_first_epoch_of_a_process_runs(tmp_path):
  """The resumed process's first epoch is held at the gate until the test has seen a
  progress line; none comes after the epoch's own line."""
  gate, gated = gated_config(tmp_path)
  out = tmp_path / 'run'
  args = [f'--config_file={REINFORCE}', f'--config_file={gated}', f'--output_dir={out}',
          *[f'--config={b}' for b in TINY]]
  first = cli_process(*args, '--config=train_rl.n_epochs = 1')
  assert first.returncode == 0, first.stderr
  proc = subprocess.Popen([sys.executable, '-m', 'rl.run', *args,
                           '--config=console.progress_seconds = 0.05'],
                          cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
  lines = []
  try:
    for line in proc.stdout:
      lines.append(line.rstrip('\n'))
      if line.startswith('epoch 2/3: collecting ('):
        break
  finally:
    gate.write_text('')
  rest, err = proc.communicate(timeout=240)
  assert proc.returncode == 0, err
  lines += rest.splitlines()
  assert lines[2].startswith('epoch 2/3: compiling acting and training')
  assert lines[3].startswith('epoch 2/3: collecting (') and 'env steps so far' in lines[3]
  epoch_2 = next(i for i, l in enumerate(lines) if l.startswith('epoch 2/3 | '))
  assert not [l for l in lines[epoch_2:] if l.endswith(') ...')], lines


def test_n_epochs_0_sets_up_a_run_that_report_does_not_count_as_finished(tmp_path):
  out = tmp_path / 'runs' / 'empty'
  result = cli(*flags(out, TINY + ['train_rl.n_epochs = 0']))
  assert result.returncode == 0, result.stderr
  assert 'train_rl.n_epochs = 0: nothing to train' in result.stdout
  assert 'Training is done' not in result.stdout and 'Next:' not in result.stdout
  report = in_process.run(str(tmp_path / 'runs'), program='rl.report')
  assert report.returncode == 0, report.stderr
  assert '| runs | CartPole-v1 | 0/1 | — |' in report.stdout
  assert '| empty | unfinished: no epoch trained | — |' in report.stdout


def test_one_epoch_is_one_epoch(tmp_path):
  experiment.execute([REINFORCE], TINY + ['train_rl.n_epochs = 1'], str(tmp_path))
  done = [l for l in (tmp_path / 'log.txt').read_text().splitlines() if 'Training is done' in l]
  assert len(done) == 1 and 'Training is done: 1 epoch, ' in done[0]


def test_descending_seed_range_is_named(tmp_path):
  result = cli(f'--config_file={REINFORCE}', f'--output_dir={tmp_path / "x"}', '--seeds=3-1')
  assert_one_line_error(result, "--seeds='3-1'", 'the range 3-1 is descending', 'write it 1-3')
  assert result.returncode == 2
  assert not (tmp_path / 'x').exists()


def test_config_path_typo_gets_a_suggestion(tmp_path):
  result = cli('--config_file=configs/ppo_cartpol.gin', f'--output_dir={tmp_path / "x"}')
  assert_one_line_error(result, "'configs/ppo_cartpol.gin' does not exist",
                        "Did you mean 'configs/ppo_cartpole.gin'?")
  assert not (tmp_path / 'x').exists()


def test_evaluate_help_lists_the_flags_it_reads_from_rl_run():
  result = subprocess.run([sys.executable, '-m', 'rl.evaluate', '--help'], cwd=ROOT,
                          capture_output=True, text=True, timeout=120)
  assert '--compilation_cache_dir' in result.stdout and '--output_dir' in result.stdout
  assert '--seeds' not in result.stdout  # rl.run's own flags stay out
  assert 'The run folder to evaluate (required)' in result.stdout  # not rl.run's default
