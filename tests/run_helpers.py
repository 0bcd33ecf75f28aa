"""What several test files share: the tiny REINFORCE run, the command line, folder snapshots.

Also the gated config that holds a run past its first checkpoint
(tests/sweep_gate.py), and what tests of a resumed run compare.
"""
import contextlib
import hashlib
import os
import signal
import subprocess
import sys
import time

import in_process
from rl.data.checkpoints import Checkpointer
from rl.metrics import TIMING_KEYS
from rl.metrics import read_metrics
import sweep_gate

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
REINFORCE = os.path.join(ROOT, 'configs', 'reinforce_cartpole.gin')
# A small, quick variant of the shipped REINFORCE config: 3 epochs of a few
# seconds, checkpointed every epoch, 2 eval episodes each.
TINY_WITHOUT_ENVS = ['train_rl.n_epochs = 3', 'train_rl.checkpoint_every = 1',
                     'PolicyGradientTrainer.n_trajectories_per_epoch = 4',
                     'PolicyGradientTrainer.batch_size = 64',
                     'PolicyGradientTrainer.n_eval_episodes = 2']
TINY = TINY_WITHOUT_ENVS[:2] + ['RLTask.n_envs = 4'] + TINY_WITHOUT_ENVS[2:]
# The shipped JAX-native PPO config with a small epoch. The JAX-native tests that train it
# through the runner bind these sizes alike (and only epoch counts, evaluation and checkpoint
# periods of their own), so its programs compile once per suite and the other tests, their
# child processes among them, read them from the session's compilation cache.
PPO_JAX = os.path.join(ROOT, 'configs', 'ppo_cartpole_jax.gin')
TINY_PPO_JAX = ['PPO.n_eval_episodes = 2', 'PPO.n_interactions_per_epoch = 64',
                'PPO.policy_batch_size = 16', 'PPO.value_batch_size = 16',
                'PPO.policy_train_steps_per_epoch = 2', 'PPO.value_train_steps_per_epoch = 2']


@contextlib.contextmanager
def full_optimization():
  """XLA with all its optimisation passes, as a user's run compiles (tests/conftest.py turns
  most of them off for the suite)."""
  import jax  # pylint: disable=import-outside-toplevel
  jax.config.update('jax_disable_most_optimizations', False)
  try:
    yield
  finally:
    jax.config.update('jax_disable_most_optimizations', True)


def snapshot(folder, ignore=()):
  """Every folder's and file's path (files with their content hash).

  Equal snapshots mean a command left the folder as it was; `ignore` names
  files to leave out (e.g. the run lock, whose holder pid is rewritten).
  """
  out = {}
  for dirpath, dirs, files in os.walk(folder):
    for name in dirs:
      out[os.path.relpath(os.path.join(dirpath, name), folder)] = 'dir'
    for name in files:
      if name in ignore:
        continue
      path = os.path.join(dirpath, name)
      with open(path, 'rb') as f:
        out[os.path.relpath(path, folder)] = hashlib.sha256(f.read()).hexdigest()
  return out


def default_sigint():
  """A Popen preexec_fn giving the child the default SIGINT disposition.

  A test run from a background job of a non-interactive shell (`cmd &` in a
  script) inherits SIGINT ignored, and so would the child it signals, which
  then never stops; with the default disposition its Python turns SIGINT
  into KeyboardInterrupt as a user's Ctrl-C would.
  """
  signal.signal(signal.SIGINT, signal.SIG_DFL)


def cli(*args):
  """`python -m rl.run *args`, called in this process (tests/in_process.py), its output captured."""
  return in_process.run(*args)


def one_epoch_then_a_resumed_one(config, output_dir, bindings):
  """The metrics.jsonl rows of `config` run for one epoch, then rerun on the same folder for a
  second, which resumes from the first's checkpoint (in-process runs, each must succeed)."""
  def run(*extra):
    return cli(f'--config_file={config}', f'--output_dir={output_dir}',
               *(f'--config={b}' for b in list(bindings) + list(extra)))
  first = run('train_rl.n_epochs = 1')
  assert first.returncode == 0, first.stderr
  second = run('train_rl.n_epochs = 2')
  assert second.returncode == 0, second.stderr
  rows = read_metrics(str(output_dir))
  assert [row['epoch'] for row in rows] == [1, 2]
  return rows


def cli_process(*args, timeout=240):
  """`python -m rl.run *args` in a new process from the repository root, its output captured.

  For tests about the process: signals, its exit, its environment, XLA's threads.
  """
  return subprocess.run([sys.executable, '-m', 'rl.run', *args], cwd=ROOT,
                        capture_output=True, text=True, timeout=timeout)


def assert_one_line_error(result, *needles):
  """The command failed with one line on stderr holding every needle."""
  assert result.returncode != 0
  err = result.stderr.strip().splitlines()
  assert len(err) == 1, result.stderr
  for needle in needles:
    assert needle in err[0], err[0]


def final_params(folder):
  step, arrays, _ = Checkpointer(os.path.join(folder, 'checkpoints')).restore_latest()
  return step, arrays['trainers']['policy']['params']


def without_timing(records):
  return [{k: v for k, v in r.items() if k not in TIMING_KEYS} for r in records]


def gated_config(tmp_path, **kwargs):
  """(gate, config) for tests/sweep_gate.py's CartPole, which waits at the gate file.

  A run on the config file (every run of a sweep given it too) stops inside
  the epoch after its first checkpoint until the test creates the gate, so a
  signal always finds it there and a run cannot finish before, however fast
  or loaded the machine is; with the gate already there it is CartPole-v1.
  kwargs: the env's other kwargs (`after_epochs`, `hold_when_stopping`).
  """
  gate = tmp_path / 'gate'
  gated = tmp_path / 'gated.gin'
  env_kwargs = {'gate': str(gate), **kwargs}
  gated.write_text('import tests.sweep_gate\n'
                   "RLTask.env = 'rl_test/GatedCartPole-v1'\n"
                   f'RLTask.env_kwargs = {env_kwargs!r}\n')
  return gate, gated


def killed_and_resumed_jax_run(flags, out, held_run, epoch, tmp_path):
  """Runs `python -m rl.run *flags --output_dir=out` with every JAX-native epoch held at a gate
  (sweep_gate.JAX_GATE_VARIABLE) once the process has saved a checkpoint, SIGKILLs it once the
  run folder `held_run` holds checkpoint `epoch`, then reruns it with the gate open: the
  resumed process's CompletedProcess."""
  gate = tmp_path / 'gate'
  env = dict(os.environ, **{sweep_gate.JAX_GATE_VARIABLE: str(gate)})
  (tmp_path / 'gated.gin').write_text('import tests.sweep_gate\n')
  command = [sys.executable, '-m', 'rl.run', *flags, f"--config_file={tmp_path / 'gated.gin'}",
             f'--output_dir={out}']
  proc = subprocess.Popen(command, cwd=ROOT, env=env, stdout=subprocess.DEVNULL,
                          stderr=subprocess.DEVNULL)
  wait_for_checkpoint(proc, held_run, epoch, gate)
  proc.send_signal(signal.SIGKILL)
  proc.wait()
  gate.write_text('')
  return subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)


def wait_for_checkpoint(proc, out, epoch, gate):
  """Waits until the run has checkpoint `epoch` and is held at `gate` (past its save)."""
  checkpoint = out / 'checkpoints' / str(epoch)
  deadline = time.time() + 180
  while (not (checkpoint.exists() and sweep_gate.waiting(gate)) and proc.poll() is None
         and time.time() < deadline):
    time.sleep(0.05)
  assert proc.poll() is None and checkpoint.exists(), 'the run never reached its checkpoint'
  assert sweep_gate.waiting(gate), 'the run never reached the gate'
