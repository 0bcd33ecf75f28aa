"""What several test files share: the tiny REINFORCE run, the command line, folder snapshots."""
import hashlib
import os
import signal
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
REINFORCE = os.path.join(ROOT, 'configs', 'reinforce_cartpole.gin')
# A small, quick variant of the shipped REINFORCE config: 3 epochs of a few
# seconds, checkpointed every epoch, 2 eval episodes each.
TINY_WITHOUT_ENVS = ['train_rl.n_epochs = 3', 'train_rl.checkpoint_every = 1',
                     'PolicyGradientTrainer.n_trajectories_per_epoch = 4',
                     'PolicyGradientTrainer.batch_size = 64',
                     'PolicyGradientTrainer.n_eval_episodes = 2']
TINY = TINY_WITHOUT_ENVS[:2] + ['RLTask.n_envs = 4'] + TINY_WITHOUT_ENVS[2:]


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


def cli(*args, timeout=240):
  """`python -m rl.run *args` from the repository root, its output captured."""
  return subprocess.run([sys.executable, '-m', 'rl.run', *args], cwd=ROOT,
                        capture_output=True, text=True, timeout=timeout)


def assert_one_line_error(result, *needles):
  """The command failed with one line on stderr holding every needle."""
  assert result.returncode != 0
  err = result.stderr.strip().splitlines()
  assert len(err) == 1, result.stderr
  for needle in needles:
    assert needle in err[0], err[0]
