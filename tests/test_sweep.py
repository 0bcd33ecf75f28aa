"""launch.sweep: the grid, folder names, and a small sweep end to end (with a failing point)."""
import hashlib
import json
import os
import subprocess
import sys

import pytest

from launch import sweep as sweep_lib
from run_helpers import REINFORCE
from run_helpers import ROOT
from run_helpers import TINY_WITHOUT_ENVS

TINY = TINY_WITHOUT_ENVS  # the sweep below sets RLTask.n_envs


def cli(*args, timeout=120):
  return subprocess.run([sys.executable, '-m', 'launch.sweep', *args], cwd=ROOT,
                        capture_output=True, text=True, timeout=timeout)


def test_expand_is_the_sorted_grid_times_seeds_with_readable_folders():
  runs = sweep_lib.expand({'RLTask.gamma': [0.99, 0.95], 'MLP.activation_fn': ['tanh']},
                          [0, 1])
  assert [r['folder'] for r in runs] == [
      'MLP.activation_fn=tanh,RLTask.gamma=0.99/seed_0',
      'MLP.activation_fn=tanh,RLTask.gamma=0.99/seed_1',
      'MLP.activation_fn=tanh,RLTask.gamma=0.95/seed_0',
      'MLP.activation_fn=tanh,RLTask.gamma=0.95/seed_1',
  ]
  assert runs[2]['bindings'] == {'MLP.activation_fn': 'tanh', 'RLTask.gamma': 0.95}
  assert runs[2]['seed'] == 0
  # The YAML order of the keys does not change the names.
  swapped = sweep_lib.expand({'MLP.activation_fn': ['tanh'], 'RLTask.gamma': [0.99, 0.95]},
                             [0, 1])
  assert [r['folder'] for r in swapped] == [r['folder'] for r in runs]


def test_folder_names_are_filesystem_safe_and_collisions_are_refused():
  name = sweep_lib.point_name({'policy/multifactor.constant': 1e-3, 'RLTask.env': 'a b/c'})
  assert name == 'RLTask.env=a_b_c,policy_multifactor.constant=0.001'
  long_name = sweep_lib.point_name({'A.b': 'x' * 500})
  assert len(long_name) <= sweep_lib.MAX_NAME
  assert long_name != sweep_lib.point_name({'A.b': 'x' * 499})
  with pytest.raises(sweep_lib.SweepError, match='same folder'):
    sweep_lib.expand({'A.b': ['a b', 'a/b']}, [0])


def test_values_become_gin_bindings():
  bindings = {'A.s': 'CartPole-v1', 'A.i': 4, 'A.f': 0.95, 'A.t': True, 'A.r': '@Adam',
              'A.l': [64, 64]}
  assert sweep_lib.gin_bindings(bindings) == [
      "A.s = 'CartPole-v1'", 'A.i = 4', 'A.f = 0.95', 'A.t = True', 'A.r = @Adam',
      'A.l = (64, 64,)']


@pytest.mark.parametrize('sweep, match', [
    ({}, 'must map'),
    ({'RLTask.gamma': 0.9}, 'non-empty list'),
    ({'RLTask.gamma': []}, 'non-empty list'),
    ({'gamma': [0.9]}, 'not a gin binding name'),
    ({'RLTask.seed': [1, 2]}, '--seeds'),
    ({'RLTask.gamma': [{'a': 1}]}, 'not a number'),
])
def test_bad_sweeps_are_refused(sweep, match):
  with pytest.raises(sweep_lib.SweepError, match=match):
    sweep_lib.validate_sweep(sweep)


def test_shipped_sweep_file_and_yaml_floats(tmp_path):
  runs = sweep_lib.expand(
      sweep_lib.load_sweep(os.path.join(ROOT, 'configs', 'sweeps', 'ppo_cartpole_sweep.yaml')),
      [0])
  assert [r['folder'] for r in runs] == ['RLTask.gamma=0.99/seed_0', 'RLTask.gamma=0.95/seed_0']
  path = tmp_path / 'lr.yaml'
  path.write_text('A.lr: [1e-3, 2.5e+1]\n')  # YAML 1.1 would read these as strings
  assert sweep_lib.load_sweep(str(path)) == {'A.lr': [0.001, 25.0]}


def test_bad_input_exits_2_with_one_line(tmp_path):
  result = cli('--backend=ray')
  assert result.returncode == 2
  assert result.stderr.strip().splitlines() == [
      "launch.sweep: error: --backend=ray is not available; only 'local' is (a 'ray' backend "
      'is not built yet).']
  bad = tmp_path / 'bad.yaml'
  bad.write_text('RLTask.gamma: 0.9\n')
  result = cli(f'--config_file={REINFORCE}', f'--sweep={bad}', f'--output_dir={tmp_path / "o"}')
  assert result.returncode == 2
  assert len(result.stderr.strip().splitlines()) == 1
  assert 'non-empty list' in result.stderr
  assert not os.path.exists(tmp_path / 'o')


def file_hash(path):
  with open(path, 'rb') as f:
    return hashlib.sha256(f.read()).hexdigest()


def test_sweep_end_to_end_with_a_failing_point_then_rerun(tmp_path):
  grid = tmp_path / 'grid.yaml'
  grid.write_text('RLTask.n_envs: [4, 0]  # rl.run rejects 0\n')
  out = tmp_path / 'sweep'
  args = [f'--config_file={REINFORCE}', f'--sweep={grid}', f'--output_dir={out}',
          '--seeds=0,1', '--parallel=2', *[f'--config={b}' for b in TINY]]
  result = cli(*args)
  assert result.returncode == 1, result.stdout + result.stderr
  assert '[sweep] 2 of 4 runs finished, 2 failed' in result.stdout
  assert 'running' in result.stdout

  with open(out / 'index.json') as f:
    index = json.load(f)
  by_folder = {r['folder']: r for r in index['runs']}
  assert list(by_folder) == ['RLTask.n_envs=4/seed_0', 'RLTask.n_envs=4/seed_1',
                             'RLTask.n_envs=0/seed_0', 'RLTask.n_envs=0/seed_1']
  for seed in (0, 1):
    ok = by_folder[f'RLTask.n_envs=4/seed_{seed}']
    assert ok['status'] == 'finished' and 'error' not in ok
    assert ok['bindings'] == {'RLTask.n_envs': 4} and ok['seed'] == seed
    bad = by_folder[f'RLTask.n_envs=0/seed_{seed}']
    assert bad['status'] == 'failed'
    assert bad['error'].startswith('rl.run: error:') and 'n_envs' in bad['error']
    assert not os.path.exists(out / bad['folder'])  # rl.run wrote nothing for it
  metrics = {seed: out / f'RLTask.n_envs=4/seed_{seed}' / 'metrics.jsonl' for seed in (0, 1)}
  for path in metrics.values():
    with open(path) as f:
      assert [json.loads(line)['epoch'] for line in f] == [1, 2, 3]
  # The seed reached each run: its operative config records it.
  with open(out / 'RLTask.n_envs=4/seed_1' / 'config.gin') as f:
    assert 'RLTask.seed = 1' in f.read()
  before = {seed: file_hash(path) for seed, path in metrics.items()}

  rerun = cli(*args)
  assert rerun.returncode == 1, rerun.stdout + rerun.stderr
  assert {seed: file_hash(path) for seed, path in metrics.items()} == before
  with open(out / 'index.json') as f:
    assert [r['status'] for r in json.load(f)['runs']] == [
        'finished', 'finished', 'failed', 'failed']
