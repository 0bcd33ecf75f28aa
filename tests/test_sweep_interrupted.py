"""A sweep interrupted midway, locally and on Ray, resumes with the same command.

2 grid points x 2 seeds, one point rl.run rejects: Ctrl-C while a run is held
at gated_config's gate past its first checkpoint exits 130, marks that run
interrupted in index.json and stops its rl.run; the rerun resumes it from its
checkpoint, runs the rest, fails the bad point alone, and (locally) a further
rerun skips the finished runs. The Ray case runs on a one-node cluster
started for this module (`ray start --head`).
"""
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

import pytest

from run_helpers import REINFORCE
from run_helpers import ROOT
from run_helpers import gated_config
from run_helpers import snapshot
from sweep_helpers import TINY
from sweep_helpers import cli
from sweep_helpers import epochs_logged
from sweep_helpers import free_port
from sweep_helpers import interrupt_midway
from sweep_helpers import lock_is_free


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


@pytest.mark.parametrize('backend', ['local', 'ray'])
def test_sweep_interrupted_resumed_with_a_failing_point(backend, tmp_path, request):
  """2 points x 2 seeds: one point rl.run rejects; Ctrl-C midway; the rerun resumes."""
  grid = tmp_path / 'grid.yaml'
  grid.write_text('RLTask.n_envs: [4, 0]  # rl.run rejects 0\n')
  out = tmp_path / 'sweep'
  gate, gated = gated_config(tmp_path)
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
  midway, status, stdout, stderr = interrupt_midway(args, out, gate, signal.SIGINT, env)
  assert midway is not None, stdout + stderr
  assert status == 130, stdout + stderr
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
