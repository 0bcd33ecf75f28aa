"""`rl.run --seeds` and its folders: a limit on the count, folders made as seeds start, no nesting."""
import os
import shutil
import subprocess
import sys

from run_helpers import REINFORCE
from run_helpers import ROOT
from run_helpers import TINY
from run_helpers import assert_one_line_error
from run_helpers import cli
from run_helpers import snapshot
from rl.seeds import MAX_SEEDS

ONE_EPOCH = [f'--config={b}' for b in TINY + ['train_rl.n_epochs = 1']]


def test_an_absurd_number_of_seeds_is_refused_before_any_folder(tmp_path):
  out = tmp_path / 'seeds'
  result = cli(f'--config_file={REINFORCE}', *ONE_EPOCH, '--seeds=0-100000', f'--output_dir={out}')
  assert_one_line_error(result, '100,001 seeds', f'at most {MAX_SEEDS:,}')
  assert result.returncode == 2 and not out.exists()
  listed = cli(f'--config_file={REINFORCE}', *ONE_EPOCH,
               '--seeds=' + ','.join(map(str, range(MAX_SEEDS + 1))), f'--output_dir={out}')
  assert_one_line_error(listed, f'{MAX_SEEDS + 1:,} seeds')
  assert not out.exists()


def test_a_gymnasium_seed_gets_its_folder_when_it_starts(tmp_path):
  out = tmp_path / 'seeds'
  # The second seed's first epoch line shows on the pipe; by then the first
  # seed is done and no third seed folder exists yet.
  with subprocess.Popen(
      [sys.executable, '-m', 'rl.run', f'--config_file={REINFORCE}', *ONE_EPOCH,
       '--seeds=0-2', f'--output_dir={out}'], cwd=ROOT, stdout=subprocess.PIPE,
      stderr=subprocess.PIPE, text=True) as proc:
    seen = []
    for line in proc.stdout:
      seen.append(line)
      if line.startswith('seed 1: ') and 'Training is done' not in line:
        assert sorted(os.listdir(out)) == ['seed_0', 'seed_1'], seen
        assert 'Training is done' in (out / 'seed_0' / 'log.txt').read_text()
        break
    else:
      raise AssertionError(''.join(seen) + proc.stderr.read())
    rest = proc.stdout.read()
    assert proc.wait() == 0, proc.stderr.read()
  assert sorted(os.listdir(out)) == ['seed_0', 'seed_1', 'seed_2'], rest


def test_seeds_on_a_single_run_folder_and_output_dir_alone_on_seeds(tmp_path, finished_run):
  # A finished single run: the tiny run this worker has made already (conftest), copied.
  single = tmp_path / 'single'
  shutil.copytree(finished_run, single)
  before = snapshot(single, ignore=('.lock',))
  nested = cli(f'--config_file={REINFORCE}', *ONE_EPOCH, '--seeds=0-1', f'--output_dir={single}')
  assert_one_line_error(nested, str(single), 'holds a single run', 'another --output_dir')
  assert nested.returncode == 2 and snapshot(single, ignore=('.lock',)) == before
  seeds = tmp_path / 'seeds'
  made = cli(f'--config_file={REINFORCE}', *ONE_EPOCH, '--seeds=0-1,3', f'--output_dir={seeds}')
  assert made.returncode == 0, made.stderr
  # Resuming the parent needs --seeds; the message gives the flag to add.
  alone = cli(f'--output_dir={seeds}')
  assert_one_line_error(alone, f'--output_dir={seeds} --seeds=0-1,3')
  resumed = cli(f'--output_dir={seeds}', '--seeds=0-1,3')
  assert resumed.returncode == 0, resumed.stderr
  assert resumed.stdout.count('is already complete') == 3
