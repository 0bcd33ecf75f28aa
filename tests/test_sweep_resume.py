"""A rerun of a sweep skips the runs that finished under the same config, and only those.

Which finished runs count as the same (seeds and backend may change; the
--config bindings compare as a set where order cannot matter, an edited config
file or a deleted folder runs them again), a finished local sweep rerun with
reordered bindings or with nothing left to run (no backend is started),
--allow_config_change letting every run resume under a changed config, and
each run's log keeping every invocation after a header line.
"""
import json
import os
import re
import shutil

import pytest

import in_process
from launch import config_check
from launch import grid
from launch import index as index_lib
from run_helpers import REINFORCE
from sweep_helpers import TINY
from sweep_helpers import free_port

# One epoch a run: the tests read which runs a rerun skips, resumes or fails,
# not what a run learns.
ONE_EPOCH = [b for b in TINY if not b.startswith('train_rl.n_epochs')] + ['train_rl.n_epochs = 1']


def cli(*args):
  """`python -m launch.sweep *args` called in this process (tests/in_process.py).

  These tests check what the sweep prints and leaves, not its process; its runs
  are rl.run processes all the same.
  """
  return in_process.run(*args, program='launch.sweep')


def test_only_the_same_finished_runs_are_skipped(tmp_path):
  included = tmp_path / 'b.gin'
  included.write_text('RLTask.gamma = 0.9\n')
  config = tmp_path / 'a.gin'
  config.write_text(f"include '{included}'\nRLTask.n_envs = 2\n")
  runs = grid.expand({'RLTask.time_limit': [10, 20]}, [0])
  extra = ['RLTask.max_steps = 5']
  header = {'config_files': [str(config)],
            'config_digest': config_check.check_config([str(config)], extra, runs),
            'extra_config': extra, 'seeds': [0], 'backend': 'local'}
  for run in runs:
    os.makedirs(tmp_path / run['folder'])
  index = [dict(runs[0], status='finished'), dict(runs[1], status='failed', error='e')]
  index_lib.write_index(str(tmp_path), header, index)
  assert index_lib.finished_before(str(tmp_path), header, runs) == {runs[0]['folder']}
  # More seeds or another backend: the finished run is still the same run.
  assert index_lib.finished_before(str(tmp_path), dict(header, seeds=[0, 1], backend='ray'),
                                   runs) == {runs[0]['folder']}
  # Another --config, or an edited config file (an included one too): all run again.
  assert not index_lib.finished_before(str(tmp_path), dict(header, extra_config=[]), runs)
  included.write_text('RLTask.gamma = 0.8\n')
  edited = dict(header, config_digest=config_check.check_config([str(config)], extra, runs))
  assert edited['config_digest'] != header['config_digest']
  assert not index_lib.finished_before(str(tmp_path), edited, runs)
  # A finished run whose folder was deleted runs again.
  os.rmdir(tmp_path / runs[0]['folder'])
  assert not index_lib.finished_before(str(tmp_path), header, runs)


def test_config_bindings_compare_as_a_set_where_order_cannot_matter():
  canonical = index_lib.canonical_bindings
  assert canonical(['A.x = 1', 'B.y = 2']) == canonical(['B.y=2', ' A.x =  1'])
  # Of two bindings of one parameter the last is the one gin applies.
  assert canonical(['A.x = 1', 'A.x = 2']) == canonical(['A.x = 2'])
  assert canonical(['A.x = 1', 'A.x = 2']) != canonical(['A.x = 2', 'A.x = 1'])
  # An include can override the bindings before it: its place counts.
  assert canonical(["include 'b.gin'", 'A.x = 1']) != canonical(['A.x = 1', "include 'b.gin'"])


@pytest.fixture(scope='module')
def finished_sweep(tmp_path_factory):
  """A sweep of one run, run to its end; yields (its output folder, its command's arguments).

  The tests that use it only rerun it with the same config, which leaves it
  finished; a test that changes its config copies the folder first.
  """
  tmp = tmp_path_factory.mktemp('finished')
  grid = tmp / 'grid.yaml'
  grid.write_text('RLTask.n_envs: [4]\n')
  out = tmp / 'sweep'
  args = [f'--config_file={REINFORCE}', f'--sweep={grid}', f'--output_dir={out}',
          '--parallel=1', *[f'--config={b}' for b in ONE_EPOCH]]
  result = cli(*args)
  assert result.returncode == 0, result.stdout + result.stderr
  yield out, args


def test_reordered_config_bindings_still_skip_the_finished_runs(finished_sweep):
  _, args = finished_sweep
  configs = [a for a in args if a.startswith('--config=')]
  others = [a for a in args if not a.startswith('--config=')]
  rerun = cli(*others, *reversed(configs))
  assert rerun.returncode == 0, rerun.stdout + rerun.stderr
  assert '[sweep] 1 of 1 runs finished earlier; skipping them' in rerun.stdout
  assert 'started' not in rerun.stdout


def test_a_rerun_with_nothing_to_run_starts_no_backend(finished_sweep):
  """Every run finished: no Ray is started or joined (here, none answers at the address)."""
  _, args = finished_sweep
  rerun = cli(*args, '--backend=ray', f'--ray_address=127.0.0.1:{free_port()}')
  assert rerun.returncode == 0, rerun.stdout + rerun.stderr
  assert '[sweep] 1 of 1 runs finished earlier; skipping them' in rerun.stdout
  assert '[sweep] 1 of 1 runs finished, 0 failed' in rerun.stdout


def test_allow_config_change_lets_every_run_resume_a_changed_config(finished_sweep, tmp_path):
  out = tmp_path / 'sweep'
  shutil.copytree(finished_sweep[0], out)
  args = [a if not a.startswith('--output_dir=') else f'--output_dir={out}'
          for a in finished_sweep[1]]
  changed = [*args, '--config=RLTask.gamma = 0.9']
  # rl.run refuses to resume a run under another config, and says how to do it anyway.
  refused = cli(*changed)
  assert refused.returncode == 1, refused.stdout + refused.stderr
  with open(out / 'index.json') as f:
    error = json.load(f)['runs'][0]['error']
  assert 'different config' in error and '--allow_config_change' in error
  resumed = cli(*changed, '--allow_config_change')
  assert resumed.returncode == 0, resumed.stdout + resumed.stderr
  assert '[sweep] 1 of 1 runs finished, 0 failed' in resumed.stdout
  with open(out / 'RLTask.n_envs=4' / 'seed_0' / 'config.gin') as f:
    assert 'RLTask.gamma = 0.9' in f.read()


def test_run_logs_keep_every_invocation_after_a_header(tmp_path):
  """seed_<n>.log is appended to, each invocation after a line with its date and command."""
  grid = tmp_path / 'grid.yaml'
  grid.write_text('RLTask.n_envs: [0]  # rl.run rejects 0: a quick run that never finishes\n')
  out = tmp_path / 'sweep'
  args = [f'--config_file={REINFORCE}', f'--sweep={grid}', f'--output_dir={out}',
          '--parallel=1', '--seeds=3']
  for _ in range(2):
    result = cli(*args)
    assert result.returncode == 1, result.stdout + result.stderr
  with open(out / 'RLTask.n_envs=0' / 'seed_3.log') as f:
    log = f.read()
  headers = re.findall(r'^=== (\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\S*) (.*)$', log, re.MULTILINE)
  assert len(headers) == 2, log
  for _, command in headers:
    assert ' -m rl.run ' in command and '--seed=3' in command and 'RLTask.n_envs = 0' in command
  assert log.count('rl.run: error:') == 2, log
  assert log.index(headers[0][1]) < log.index('rl.run: error:') < log.rindex(headers[1][1])
