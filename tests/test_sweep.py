"""launch.sweep: the grid, folder names, and a small sweep end to end, locally and on Ray."""
import concurrent.futures
import fcntl
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

import pytest

from launch import config_check
from launch import grid
from launch import index as index_lib
from launch import runner
from launch.errors import SweepError
from run_helpers import REINFORCE
from run_helpers import ROOT
from run_helpers import TINY_WITHOUT_ENVS
from run_helpers import default_sigint
from run_helpers import snapshot
import sweep_gate

TINY = TINY_WITHOUT_ENVS  # the sweep below sets RLTask.n_envs


def cli(*args, timeout=120):
  return subprocess.run([sys.executable, '-m', 'launch.sweep', *args], cwd=ROOT,
                        capture_output=True, text=True, timeout=timeout)


def test_expand_is_the_sorted_grid_times_seeds_with_readable_folders():
  runs = grid.expand({'RLTask.gamma': [0.99, 0.95], 'MLP.activation_fn': ['tanh']},
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
  swapped = grid.expand({'MLP.activation_fn': ['tanh'], 'RLTask.gamma': [0.99, 0.95]},
                             [0, 1])
  assert [r['folder'] for r in swapped] == [r['folder'] for r in runs]


def test_folder_names_are_filesystem_safe_and_collisions_are_refused():
  name = grid.point_name({'policy/multifactor.constant': 1e-3, 'RLTask.env': 'a b/c'})
  assert name == 'RLTask.env=a_b_c,policy_multifactor.constant=0.001'
  long_name = grid.point_name({'A.b': 'x' * 500})
  assert len(long_name) <= grid.MAX_NAME
  assert long_name != grid.point_name({'A.b': 'x' * 499})
  with pytest.raises(SweepError, match='same folder'):
    grid.expand({'A.b': ['a b', 'a/b']}, [0])


def test_values_become_gin_bindings():
  bindings = {'A.s': 'CartPole-v1', 'A.i': 4, 'A.f': 0.95, 'A.t': True, 'A.r': '@Adam',
              'A.l': [64, 64]}
  assert grid.gin_bindings(bindings) == [
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
  with pytest.raises(SweepError, match=match):
    grid.validate_sweep(sweep)


def test_shipped_sweep_file_and_yaml_floats(tmp_path):
  runs = grid.expand(
      grid.load_sweep(os.path.join(ROOT, 'configs', 'sweeps', 'ppo_cartpole_sweep.yaml')),
      [0])
  assert [r['folder'] for r in runs] == ['RLTask.gamma=0.99/seed_0', 'RLTask.gamma=0.95/seed_0']
  path = tmp_path / 'lr.yaml'
  path.write_text('A.lr: [1e-3, 2.5e+1]\n')  # YAML 1.1 would read these as strings
  assert grid.load_sweep(str(path)) == {'A.lr': [0.001, 25.0]}


def test_bad_input_exits_2_with_one_line(tmp_path):
  bad = tmp_path / 'bad.yaml'
  bad.write_text('RLTask.gamma: 0.9\n')
  good = tmp_path / 'good.yaml'
  good.write_text('RLTask.gamma: [0.9]\n')
  base = [f'--config_file={REINFORCE}', f'--output_dir={tmp_path / "o"}']
  cases = [
      ([f'--sweep={bad}'], 'non-empty list'),
      ([f'--sweep={good}', '--ray_address=auto'], '--ray_address applies only to --backend=ray'),
      # Nothing listens on a port just freed: refused at once, not after Ray's minutes of retries.
      ([f'--sweep={good}', '--backend=ray', f'--ray_address=127.0.0.1:{free_port()}'],
       'cannot reach a Ray cluster'),
      ([f'--sweep={good}', '--backend=ray', '--ray_num_cpus=0'], '--ray_num_cpus must be > 0'),
  ]
  for args, message in cases:
    assert_refused(cli(*base, *args), message)
    assert not os.path.exists(tmp_path / 'o')


def assert_refused(result, message):
  """The sweep refused its input with one line naming `message`, exit status 2."""
  assert result.returncode == 2, (result.args, result.stderr)
  lines = result.stderr.strip().splitlines()
  assert len(lines) == 1 and lines[0].startswith('launch.sweep: error:'), result.stderr
  assert message in lines[0], lines[0]


def test_flags_that_would_not_act_on_a_sweep_are_refused(tmp_path):
  """rl.run's --seed, or a flag of a module the runs use, is refused rather than ignored."""
  grid = tmp_path / 'grid.yaml'
  grid.write_text('RLTask.gamma: [0.9]\n')
  base = [f'--config_file={REINFORCE}', f'--sweep={grid}', f'--output_dir={tmp_path / "o"}']
  assert_refused(cli(*base, '--seed=5'), '--seeds=5')
  # orbax defines this flag; the sweep does not import orbax (rl.data.checkpoints
  # loads it at the first checkpoint), so it is an unknown flag here.
  assert_refused(cli(*base, '--experimental_orbax_use_distributed_barrier'),
                 "flag 'experimental_orbax_use_distributed_barrier'")
  assert not os.path.exists(tmp_path / 'o')


def help_entries(text):
  """{flag name: its description on one line} of absl's --help or --helpfull text."""
  entries = {}
  name = None
  for line in text.splitlines():
    m = re.match(r'  (?:-.,)?--(?:\[no\])?(\w+): ?(.*)', line)
    if m:
      name = m.group(1)
      entries[name] = m.group(2)
    elif name is not None and line.startswith('    '):
      entries[name] += ' ' + line.strip()
    else:
      name = None
  return entries


def test_help_describes_every_flag_as_it_acts_in_a_sweep():
  result = cli('--help')  # absl's help exits with status 1
  entries = help_entries(result.stdout)
  assert {'config_file', 'config', 'output_dir', 'allow_config_change', 'seed', 'sweep',
          'seeds', 'parallel', 'backend', 'ray_address', 'ray_num_cpus',
          'ray_num_gpus'} <= set(entries), sorted(entries)
  assert 'every run' in entries['config_file']
  assert 'every run' in entries['config']
  assert entries['output_dir'].startswith('The sweep folder')
  assert 'every run' in entries['allow_config_change']
  assert entries['seed'].startswith('Refused') and '--seeds' in entries['seed']
  # --helpfull lists them once, with the sweep's text, not as rl.run's single-run flags.
  full = cli('--helpfull')
  assert help_entries(full.stdout)['output_dir'] == entries['output_dir']
  assert 'The run folder' not in full.stdout and 'Overrides RLTask.seed' not in full.stdout


def free_port():
  with socket.socket() as s:
    s.bind(('127.0.0.1', 0))
    return s.getsockname()[1]


# Ray 2.60 turns on token authentication for clusters started by `ray start`;
# the test's cluster lives on loopback for one test module, so it goes without.
RAY_ENV = dict(os.environ, RAY_AUTH_MODE='disabled')


@pytest.fixture(scope='module')
def ray_head():
  """A one-node Ray cluster with 2 CPUs, as `ray start --head` makes one; yields its address."""
  port = free_port()
  # Ray puts unix sockets under its temp dir, whose paths may not exceed 107 bytes.
  temp_dir = tempfile.mkdtemp(prefix='ray', dir='/tmp')
  with open(os.path.join(temp_dir, 'head.log'), 'w') as log:
    head = subprocess.Popen(
        [sys.executable, '-c', 'from ray.scripts.scripts import main; main()', 'start',
         '--head', '--block', f'--port={port}', '--num-cpus=2', '--include-dashboard=false',
         f'--temp-dir={temp_dir}', '--disable-usage-stats'],
        stdout=log, stderr=subprocess.STDOUT, env=RAY_ENV, start_new_session=True)
  try:
    deadline = time.monotonic() + 120
    while True:  # the GCS port answers once the head is up
      assert head.poll() is None, open(os.path.join(temp_dir, 'head.log')).read()
      try:
        socket.create_connection(('127.0.0.1', port), timeout=1).close()
        break
      except OSError:
        assert time.monotonic() < deadline, 'the Ray head did not start in 120 s'
        time.sleep(0.5)
    yield f'127.0.0.1:{port}'
  finally:
    # `ray start --block` stops the processes it started when it gets SIGTERM
    # (sent to the whole group, the processes linger for half a minute).
    head.terminate()
    try:
      head.wait(60)
    finally:
      try:
        os.killpg(head.pid, signal.SIGKILL)  # whatever is left of the group
      except ProcessLookupError:
        pass  # nothing was
    shutil.rmtree(temp_dir, ignore_errors=True)


def lock_is_free(run_dir):
  """True once no process holds rl.run's lock on the folder (its rl.run has exited)."""
  with open(os.path.join(run_dir, '.lock'), 'a+') as f:
    try:
      fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
      return False
    fcntl.flock(f, fcntl.LOCK_UN)
    return True


def epochs_logged(run_dir):
  path = os.path.join(run_dir, 'metrics.jsonl')
  if not os.path.exists(path):
    return []
  with open(path) as f:
    return [json.loads(line)['epoch'] for line in f if line.endswith('\n')]


def has_checkpoint(run_dir):
  folder = os.path.join(run_dir, 'checkpoints')
  return os.path.isdir(folder) and any(name.isdigit() for name in os.listdir(folder))


def gated_config(tmp_path):
  """A config file that holds every run after its first checkpoint until `gate` exists.

  Its runs play tests/sweep_gate.py's CartPole, whose steps wait at the gate
  file once their run has a checkpoint: until the test creates the file, a run
  cannot finish, however fast or loaded the machine is. Returns (config, gate).
  """
  gate = tmp_path / 'gate'
  config = tmp_path / 'gated.gin'
  config.write_text('import tests.sweep_gate\n'
                    "RLTask.env = 'rl_test/GatedCartPole-v1'\n"
                    f'RLTask.env_kwargs = {{"gate": {str(gate)!r}}}\n')
  return config, gate


def wait_until_a_run_is_midway(out, sweep, gate, timeout=300):
  """A good run with a checkpoint that has not logged its last epoch; None if none was seen.

  With gated_config's gate closed such a run stays midway, so this cannot miss it;
  it is returned once a run is held at the gate, past its checkpoint's save.
  """
  deadline = time.monotonic() + timeout
  while time.monotonic() < deadline and sweep.poll() is None:
    for seed in (0, 1):
      run_dir = out / f'RLTask.n_envs=4/seed_{seed}'
      if (has_checkpoint(run_dir) and len(epochs_logged(run_dir)) < 3
          and sweep_gate.waiting(gate)):
        return run_dir
    time.sleep(0.05)
  return None


@pytest.mark.parametrize('backend', ['local', 'ray'])
def test_sweep_interrupted_resumed_with_a_failing_point(backend, tmp_path, request):
  """2 points x 2 seeds: one point rl.run rejects; Ctrl-C midway; the rerun resumes."""
  grid = tmp_path / 'grid.yaml'
  grid.write_text('RLTask.n_envs: [4, 0]  # rl.run rejects 0\n')
  out = tmp_path / 'sweep'
  gated, gate = gated_config(tmp_path)
  args = [f'--config_file={REINFORCE}', f'--config_file={gated}', f'--sweep={grid}',
          f'--output_dir={out}', '--seeds=0,1', *[f'--config={b}' for b in TINY]]
  env = None
  if backend == 'ray':
    args += ['--backend=ray', f'--ray_address={request.getfixturevalue("ray_head")}']
    env = RAY_ENV
  else:
    args += ['--parallel=2']

  # 1. Interrupted as soon as a run has a checkpoint and more epochs to go. The
  # gate is closed: the runs wait after their first checkpoint, so the sweep
  # cannot finish before the interrupt, whatever the machine's load.
  sweep = subprocess.Popen([sys.executable, '-m', 'launch.sweep', *args], cwd=ROOT, env=env,
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                           preexec_fn=default_sigint)
  try:
    midway = wait_until_a_run_is_midway(out, sweep, gate)
    if midway is None:
      sweep.kill()
    sweep.send_signal(signal.SIGINT)
    stdout, stderr = sweep.communicate(timeout=120)
  finally:
    if sweep.poll() is None:  # the test failed midway: no sweep (nor its runs) left behind
      sweep.kill()
      sweep.communicate()
  assert midway is not None, stdout + stderr
  assert sweep.returncode == 130, stdout + stderr
  assert '[sweep] interrupted:' in stdout and 'rerun the same command to resume' in stdout
  with open(out / 'index.json') as f:
    index = json.load(f)
  assert index['backend'] == backend
  status = {r['folder']: r['status'] for r in index['runs']}
  assert status[str(midway.relative_to(out))] == 'interrupted'
  assert set(status.values()) <= {'pending', 'interrupted', 'finished', 'failed'}
  # The interrupt stopped its rl.run too (no orphan left training).
  deadline = time.monotonic() + 30
  while not lock_is_free(midway):
    assert time.monotonic() < deadline, 'rl.run still holds its folder after the interrupt'
    time.sleep(0.2)
  cut_at = epochs_logged(midway)
  assert len(cut_at) < 3

  # 2. The same command resumes the cut run and runs the rest; the bad point fails alone.
  # The gate is open from now on: the runs go through (the config stays the same).
  gate.touch()
  result = cli(*args, timeout=600) if env is None else subprocess.run(
      [sys.executable, '-m', 'launch.sweep', *args], cwd=ROOT, env=env, capture_output=True,
      text=True, timeout=600)
  assert result.returncode == 1, result.stdout + result.stderr
  assert '[sweep] 2 of 4 runs finished, 2 failed' in result.stdout
  with open(out / 'index.json') as f:
    by_folder = {r['folder']: r for r in json.load(f)['runs']}
  assert list(by_folder) == ['RLTask.n_envs=4/seed_0', 'RLTask.n_envs=4/seed_1',
                             'RLTask.n_envs=0/seed_0', 'RLTask.n_envs=0/seed_1']
  for seed in (0, 1):
    ok = by_folder[f'RLTask.n_envs=4/seed_{seed}']
    assert ok['status'] == 'finished' and 'error' not in ok
    assert ok['bindings'] == {'RLTask.n_envs': 4} and ok['seed'] == seed
    assert epochs_logged(out / ok['folder']) == [1, 2, 3]
    bad = by_folder[f'RLTask.n_envs=0/seed_{seed}']
    assert bad['status'] == 'failed'
    assert bad['error'].startswith('rl.run: error:') and 'n_envs' in bad['error']
    assert not os.path.exists(out / bad['folder'])  # rl.run wrote nothing for it
  with open(str(midway) + '.log') as f:
    assert 'Resuming' in f.read()  # from its checkpoint, not from scratch
  # The seed reached each run: its operative config records it.
  with open(out / 'RLTask.n_envs=4/seed_1' / 'config.gin') as f:
    assert 'RLTask.seed = 1' in f.read()

  if backend == 'local':
    # 3. Once more: the finished runs are skipped, their folders and logs untouched.
    before = snapshot(out / 'RLTask.n_envs=4')
    rerun = cli(*args, timeout=600)
    assert rerun.returncode == 1, rerun.stdout + rerun.stderr
    assert '[sweep] 2 of 4 runs finished earlier; skipping them' in rerun.stdout
    assert 'RLTask.n_envs=4/seed_0 started' not in rerun.stdout
    assert '[sweep] 2 of 4 runs finished, 2 failed' in rerun.stdout
    assert snapshot(out / 'RLTask.n_envs=4') == before


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

def test_a_config_typo_fails_the_sweep_up_front(tmp_path):
  grid = tmp_path / 'grid.yaml'
  grid.write_text('RLTask.gama: [0.9, 0.8]\n')
  result = cli(f'--config_file={REINFORCE}', f'--sweep={grid}', f'--output_dir={tmp_path / "o"}')
  assert result.returncode == 2
  assert result.stderr.strip().splitlines() == [
      "launch.sweep: error: grid point RLTask.gama=0.9: 'RLTask' has no parameter 'gama'. "
      "Did you mean 'gamma'? Fix the binding's parameter name."]
  assert not os.path.exists(tmp_path / 'o')


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
          '--parallel=1', *[f'--config={b}' for b in TINY]]
  result = cli(*args, timeout=600)
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
  refused = cli(*changed, timeout=600)
  assert refused.returncode == 1, refused.stdout + refused.stderr
  with open(out / 'index.json') as f:
    error = json.load(f)['runs'][0]['error']
  assert 'different config' in error and '--allow_config_change' in error
  resumed = cli(*changed, '--allow_config_change', timeout=600)
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
    result = cli(*args, timeout=600)
    assert result.returncode == 1, result.stdout + result.stderr
  with open(out / 'RLTask.n_envs=0' / 'seed_3.log') as f:
    log = f.read()
  headers = re.findall(r'^=== (\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\S*) (.*)$', log, re.MULTILINE)
  assert len(headers) == 2, log
  for _, command in headers:
    assert ' -m rl.run ' in command and '--seed=3' in command and 'RLTask.n_envs = 0' in command
  assert log.count('rl.run: error:') == 2, log
  assert log.index(headers[0][1]) < log.index('rl.run: error:') < log.rindex(headers[1][1])


# -- JAX-native grid points: one rl.run --seeds per point ---------------------------

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
  runs = grid.expand({'PPO.epsilon': [0.1, 0.2]}, [0, 1, 2])
  together = {'PPO.epsilon=0.1', 'PPO.epsilon=0.2'}
  skipped = {'PPO.epsilon=0.1/seed_1', 'PPO.epsilon=0.2/seed_0', 'PPO.epsilon=0.2/seed_1',
             'PPO.epsilon=0.2/seed_2'}
  backend = RecordingBackend(fail=['PPO.epsilon=0.1'])
  done = runner.run_sweep(runs, [PPO_JAX], [], str(tmp_path), backend, skipped=skipped,
                             together=together)
  # One process for the point with seeds left, with only those; none for the finished point.
  assert [(os.path.basename(j['output_dir']), j['seeds']) for j in backend.jobs] == [
      ('PPO.epsilon=0.1', [0, 2])]
  assert processes_command(backend.jobs[0]).count('--seeds=0,2') == 1
  status = {r['folder']: (r['status'], r.get('error')) for r in done}
  assert status['PPO.epsilon=0.1/seed_0'] == ('failed', 'rl.run: error: boom')
  assert status['PPO.epsilon=0.1/seed_2'] == ('failed', 'rl.run: error: boom')
  assert status['PPO.epsilon=0.1/seed_1'] == ('finished', None)
  assert all(s == ('finished', None) for f, s in status.items() if f.startswith('PPO.epsilon=0.2'))


def processes_command(job):
  from launch import processes  # pylint: disable=import-outside-toplevel
  return processes.rl_run_command(job['config_files'], job['output_dir'], job['seed'],
                                  job['bindings'], job['allow_config_change'],
                                  job['compilation_cache_dir'], job['seeds'])


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
