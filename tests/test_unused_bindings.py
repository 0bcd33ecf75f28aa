"""Bindings of configurables a run never uses are reported, not silently dropped."""
from run_helpers import REINFORCE
from run_helpers import TINY
from run_helpers import cli

ONE_EPOCH = [f'--config={b}' for b in TINY + ['train_rl.n_epochs = 1']]


def warnings(text):
  return [line for line in text.splitlines() if 'not used by this run' in line]


def test_a_binding_of_an_unused_configurable_is_one_warning_line(tmp_path):
  out = tmp_path / 'run'
  result = cli(f'--config_file={REINFORCE}', *ONE_EPOCH, '--config=DQN.n_eval_episodes = 5',
               f'--output_dir={out}')
  assert result.returncode == 0, result.stderr
  [line] = warnings(result.stdout)
  assert 'DQN.n_eval_episodes' in line and '@PolicyGradientTrainer' in line, line
  assert 'no effect' in line
  # log.txt keeps it; config.gin holds it as a comment after what the run used,
  # and so resuming from it alone warns of nothing.
  [logged] = warnings((out / 'log.txt').read_text())
  assert logged.endswith(line)
  saved = (out / 'config.gin').read_text()
  assert [l for l in saved.splitlines() if 'DQN' in l] == ['# DQN.n_eval_episodes = 5']
  resumed = cli(f'--output_dir={out}')
  assert resumed.returncode == 0, resumed.stderr
  assert 'is already complete' in resumed.stdout and warnings(resumed.stdout) == []


def test_unused_bindings_of_a_config_file_and_macros_are_named_together(tmp_path):
  shared = tmp_path / 'shared.gin'
  shared.write_text('UNUSED_RATE = 0.1\nDQN.batch_size = 32\nSamplingAWR.n_eval_episodes = 3\n')
  config = tmp_path / 'run.gin'
  config.write_text(f"include '{REINFORCE}'\ninclude 'shared.gin'\n")
  result = cli(f'--config_file={config}', *ONE_EPOCH, f'--output_dir={tmp_path / "run"}')
  assert result.returncode == 0, result.stderr
  [line] = warnings(result.stdout)
  for name in ('UNUSED_RATE', 'DQN.batch_size', 'SamplingAWR.n_eval_episodes'):
    assert name in line, line
  # The shipped config alone binds nothing unused.
  clean = cli(f'--config_file={REINFORCE}', *ONE_EPOCH, f'--output_dir={tmp_path / "clean"}')
  assert clean.returncode == 0 and warnings(clean.stdout) == []


def test_unused_bindings_make_no_difference_to_a_resume(tmp_path):
  out = tmp_path / 'run'
  two = [f'--config={b}' for b in TINY + ['train_rl.n_epochs = 2']]
  first = cli(f'--config_file={REINFORCE}', *ONE_EPOCH, '--config=DQN.n_eval_episodes = 5',
              f'--output_dir={out}')
  assert first.returncode == 0, first.stderr
  # Dropping the binding that had no effect, or adding another, still resumes.
  dropped = cli(f'--config_file={REINFORCE}', *two, '--config=AWR.n_eval_episodes = 2',
                f'--output_dir={out}')
  assert dropped.returncode == 0, dropped.stderr
  assert f'Resuming {out} from epoch 1/2' in dropped.stdout
  # A binding the run uses is still a difference.
  changed = cli(f'--config_file={REINFORCE}', *two, '--config=RLTask.gamma = 0.5',
                f'--output_dir={out}')
  assert changed.returncode == 2 and 'RLTask.gamma' in changed.stderr


def test_a_long_list_of_unused_bindings_is_counted_on_the_console_and_whole_in_the_log(tmp_path):
  out = tmp_path / 'run'
  unused = [f'DQN.{name} = 3' for name in ('batch_size', 'n_eval_episodes', 'eval_every',
                                            'sync_freq', 'max_slice_length', 'n_replay_epochs',
                                            'value_batch_size')]
  result = cli(f'--config_file={REINFORCE}', *ONE_EPOCH, *[f'--config={b}' for b in unused],
               f'--output_dir={out}')
  assert result.returncode == 0, result.stderr
  [line] = warnings(result.stdout)
  assert 'and 2 more (all in log.txt)' in line, line
  [listed] = [l for l in (out / 'log.txt').read_text().splitlines()
              if 'Bindings not used by this run: ' in l]
  for binding in unused:
    assert binding.split(' =')[0] in listed, listed
  assert 'Bindings not used' not in result.stdout
