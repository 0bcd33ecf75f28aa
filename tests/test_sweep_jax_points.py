"""JAX-native grid points: a sweep runs one rl.run --seeds per point, not one per seed, and
one rl.run --grid for points that differ only in float hyperparameters (rl.grid).

Which points are JAX-native comes from each point's parsed config (the grid,
the config file or a macro); a recording backend shows one job for such a
point's unfinished seeds, one a seed for gymnasium points, index.json still one
entry a seed, and a failed point failing all its seeds. End to end (`-m slow`):
2 points x 2 seeds of PPO on gymnax's CartPole make 2 processes and 4 run folders.
"""
import concurrent.futures
import json
import os
import re

import pytest

from launch import config_check
from launch import grid
from launch import runner
from run_helpers import ROOT
from sweep_helpers import cli
from sweep_helpers import epochs_logged
from sweep_helpers import has_checkpoint


PPO_JAX = os.path.join(ROOT, 'configs', 'ppo_cartpole_jax.gin')
PPO_GYM = os.path.join(ROOT, 'configs', 'ppo_cartpole.gin')
TINY_PPO = ['train_rl.n_epochs = 2', 'PPO.n_eval_episodes = 1', 'PPO.eval_every = 2']


class RecordingBackend:
  """A backend that runs nothing: it records each job and reports it finished (or failed)."""

  in_flight = 'running'

  def __init__(self, fail=()):
    self.jobs = []
    self.fail = fail  # output folders whose process fails

  def submit(self, job):
    self.jobs.append(job)
    future = concurrent.futures.Future()
    failed = any(job['output_dir'].endswith(f) for f in self.fail)
    future.set_result('rl.run: error: boom' if failed else None)
    return future


def test_a_grid_over_the_env_groups_only_the_jax_native_points_seeds(tmp_path):
  """Per point, from its parsed config: gymnax points one process, gymnasium a process a seed."""
  runs = grid.expand({'RLTask.env': ['CartPole-v1', 'gymnax:CartPole-v1']}, [0, 1])
  _, jax_points = config_check.check_points([PPO_GYM], [], runs)
  assert jax_points == {'RLTask.env=gymnax_CartPole-v1'}
  # The env of the config file, or through a macro, counts as much as the grid's.
  one = grid.expand({'PPO.epsilon': [0.2]}, [0])
  assert config_check.check_points([PPO_JAX], [], one)[1] == {'PPO.epsilon=0.2'}
  assert config_check.check_points([PPO_GYM], [], one)[1] == set()
  macro = ["ENV = 'gymnax:CartPole-v1'", 'RLTask.env = %ENV']
  assert config_check.check_points([PPO_GYM], macro, one)[1] == {'PPO.epsilon=0.2'}

  backend = RecordingBackend()
  out = tmp_path / 'sweep'
  done = runner.run_sweep(runs, [PPO_GYM], ['X.y = 1'], str(out), backend,
                             together=jax_points)
  assert [(os.path.relpath(j['output_dir'], out), j['seed'], j.get('seeds'),
           os.path.relpath(j['log_path'], out)) for j in backend.jobs] == [
      ('RLTask.env=CartPole-v1/seed_0', 0, None, 'RLTask.env=CartPole-v1/seed_0.log'),
      ('RLTask.env=CartPole-v1/seed_1', 1, None, 'RLTask.env=CartPole-v1/seed_1.log'),
      ('RLTask.env=gymnax_CartPole-v1', None, [0, 1], 'RLTask.env=gymnax_CartPole-v1/seeds.log'),
  ]
  assert backend.jobs[2]['bindings'] == ['X.y = 1', "RLTask.env = 'gymnax:CartPole-v1'"]
  # index.json still lists one run a seed, each with its log.
  with open(out / 'index.json') as f:
    index = json.load(f)['runs']
  gym, jax = 'RLTask.env=CartPole-v1', 'RLTask.env=gymnax_CartPole-v1'
  assert [(r['folder'], r['status'], r['log']) for r in index] == [
      (f'{gym}/seed_0', 'finished', f'{gym}/seed_0.log'),
      (f'{gym}/seed_1', 'finished', f'{gym}/seed_1.log'),
      (f'{jax}/seed_0', 'finished', f'{jax}/seeds.log'),
      (f'{jax}/seed_1', 'finished', f'{jax}/seeds.log'),
  ]
  assert [r['status'] for r in done] == ['finished'] * 4


def test_a_jax_native_point_runs_only_its_unfinished_seeds_and_fails_them_together(tmp_path):
  runs = grid.expand({'train_rl.checkpoint_every': [1, 2]}, [0, 1, 2])
  one, two = 'train_rl.checkpoint_every=1', 'train_rl.checkpoint_every=2'
  together = {one, two}
  skipped = {f'{one}/seed_1', f'{two}/seed_0', f'{two}/seed_1', f'{two}/seed_2'}
  backend = RecordingBackend(fail=[one])
  done = runner.run_sweep(runs, [PPO_JAX], [], str(tmp_path), backend, skipped=skipped,
                          together=together)
  # One process for the point with seeds left, with only those; none for the finished point.
  assert [(os.path.basename(j['output_dir']), j['seeds']) for j in backend.jobs] == [
      (one, [0, 2])]
  assert processes_command(backend.jobs[0]).count('--seeds=0,2') == 1
  status = {r['folder']: (r['status'], r.get('error')) for r in done}
  assert status[f'{one}/seed_0'] == ('failed', 'rl.run: error: boom')
  assert status[f'{one}/seed_2'] == ('failed', 'rl.run: error: boom')
  assert status[f'{one}/seed_1'] == ('finished', None)
  assert all(s == ('finished', None) for f, s in status.items() if f.startswith(two))


def test_jax_native_points_that_differ_in_float_hyperparameters_run_as_one_grid(tmp_path):
  """Per program (the bindings but rl.grid.TRACEABLE's): one rl.run --grid, whose member
  folders are the sweep's own."""
  from rl import grid as rl_grid  # pylint: disable=import-outside-toplevel
  from rl import members  # pylint: disable=import-outside-toplevel
  sweep = {'PPO.epsilon': [0.2, 0.1], 'RLTask.n_envs': [4, 8], 'RLTask.env': ['gymnax:X-v1']}
  runs = grid.expand(sweep, [0, 1])
  together = {grid.point_of(r) for r in runs}
  backend = RecordingBackend()
  out = tmp_path / 'sweep'
  done = runner.run_sweep(runs, [PPO_JAX], ['X.y = 1'], str(out), backend, together=together)
  assert [(j['output_dir'], j['seeds'], j['grid'], os.path.relpath(j['log_path'], out),
           j['bindings']) for j in backend.jobs] == [
      (str(out), [0, 1], {'PPO.epsilon': [0.2, 0.1], 'RLTask.env': ['gymnax:X-v1'],
                          'RLTask.n_envs': [n]},
       f'grid_RLTask.env=gymnax_X-v1,RLTask.n_envs={n}.log', ['X.y = 1']) for n in (4, 8)]
  command = processes_command(backend.jobs[0])
  assert "--grid=PPO.epsilon=[0.2, 0.1]" in command and '--seeds=0,1' in command
  # rl.run --grid puts each member where the sweep lists it.
  flags = [c[len('--grid='):] for c in command if c.startswith('--grid=')]
  folders = [os.path.relpath(m.folder, out)
             for m in members.members_of(str(out), [0, 1], rl_grid.parse_grid(flags))]
  assert sorted(folders) == sorted(r['folder'] for r in runs if "n_envs=4" in r['folder'])
  assert {r['log'] for r in done if 'n_envs=8' in r['folder']} == {
      'grid_RLTask.env=gymnax_X-v1,RLTask.n_envs=8.log'}
  assert [r['status'] for r in done] == ['finished'] * 8


def processes_command(job):
  from launch import processes  # pylint: disable=import-outside-toplevel
  return processes.rl_run_command(job['config_files'], job['output_dir'], job['seed'],
                                  job['bindings'], job['allow_config_change'],
                                  job['compilation_cache_dir'], job['seeds'], job.get('grid'))


# End to end (about a minute of CPU, compiling two JAX-native runs): `-m slow`.
# The grouping of seeds into one process per point is checked in the tests
# above on a recording backend, and rl.run --seeds in tests/test_jax_envs.py.
@pytest.mark.slow
def test_a_jax_native_sweep_runs_one_rl_run_per_grid_point(tmp_path):
  """2 points x 2 seeds of PPO on gymnax's CartPole: 2 processes, 4 complete run folders.

  The grid's values leave the compiled programs alike, and the points run one
  after the other, so the second finds the first's in the compilation cache.
  """
  pytest.importorskip('gymnax')
  grid = tmp_path / 'grid.yaml'
  grid.write_text('train_rl.checkpoint_every: [1, 2]\n')
  out = tmp_path / 'sweep'
  args = [f'--config_file={PPO_JAX}', f'--sweep={grid}', f'--output_dir={out}', '--seeds=0,1',
          '--parallel=1', *[f'--config={b}' for b in TINY_PPO]]
  result = cli(*args, timeout=300)
  assert result.returncode == 0, result.stdout + result.stderr
  assert '[sweep] 4 of 4 runs finished, 0 failed' in result.stdout
  for every in (1, 2):
    assert f'train_rl.checkpoint_every={every} (seeds 0,1) started' in result.stdout
  assert 'seed_0 started' not in result.stdout
  with open(out / 'index.json') as f:
    index = json.load(f)['runs']
  assert [(r['folder'], r['seed'], r['status'], r['log']) for r in index] == [
      (f'train_rl.checkpoint_every={e}/seed_{s}', s, 'finished',
       f'train_rl.checkpoint_every={e}/seeds.log')
      for e in (1, 2) for s in (0, 1)]
  for every in (1, 2):
    point = out / f'train_rl.checkpoint_every={every}'
    # One rl.run for the point's seeds: one invocation in its log, no per-seed logs.
    with open(point / 'seeds.log') as f:
      log = f.read()
    commands = re.findall(r'^=== \S+ (.*)$', log, re.MULTILINE)
    assert len(commands) == 1, log
    assert '--seeds=0,1' in commands[0] and '--seed=' not in commands[0]
    assert f'--output_dir={point}' in commands[0]
    assert sorted(os.listdir(point)) == ['seed_0', 'seed_1', 'seeds.log']
    for seed in (0, 1):
      assert f'seed {seed}: Training is done: 2 epochs' in log
      run_dir = point / f'seed_{seed}'
      assert epochs_logged(run_dir) == [1, 2]
      assert has_checkpoint(run_dir)
      with open(run_dir / 'config.gin') as f:
        config = f.read()
      assert f'RLTask.seed = {seed}' in config
      assert f'train_rl.checkpoint_every = {every}' in config
      assert "RLTask.env = 'gymnax:CartPole-v1'" in config
      assert os.path.exists(run_dir / 'log.txt')
  # A rerun starts nothing: every seed of every point finished.
  rerun = cli(*args, timeout=300)
  assert rerun.returncode == 0, rerun.stdout + rerun.stderr
  assert '[sweep] 4 of 4 runs finished earlier; skipping them' in rerun.stdout
  assert 'started' not in rerun.stdout
