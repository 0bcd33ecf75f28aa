"""A CartPole that holds its run midway until a test opens a gate (tests/test_sweep_interrupted.py).

A gin config with the line `import tests.sweep_gate` registers
'rl_test/GatedCartPole-v1': CartPole-v1 whose `step` waits once its run has saved a
checkpoint, while the file named by the env kwarg `gate` does not exist:

  import tests.sweep_gate
  RLTask.env = 'rl_test/GatedCartPole-v1'
  RLTask.env_kwargs = {'gate': '/abs/path/gate'}

So a run checkpoints its first epoch and then stops inside its second, however
fast or loaded the machine is, and leaves a marker `<gate>.waiting-<pid>` once
it is held (`waiting(gate)`), so a test signals it only then: a test that
interrupts a sweep always finds the run midway, not finished. Creating the gate
file lets every run go on (a resumed run too: the path is in the config, the
file on disk). So does a Ctrl-C or SIGTERM, which asks the run to finish its
epoch (rl.termination): the gate leaves `<gate>.stop-asked-<pid>` and lets it,
unless the env kwarg `hold_when_stopping` keeps it held for a second signal.
With the env kwarg `after_epochs=N` the run is held once its metrics.jsonl
holds N epochs instead of after its first checkpoint. A gate never opened
fails the run after GATE_TIMEOUT_S, so a broken test cannot hang CI.

Imported as `tests.sweep_gate`: rl.run's children start in the repository root
(launch/processes.py), where `tests` is a namespace package. The run folder is
rl.run's --output_dir flag, so the env is for `python -m rl.run` processes
(what launch.sweep starts), not for in-process `rl.experiment.execute` calls.
"""
import os
import time

from absl import flags
import gymnasium as gym
from gymnasium.envs.classic_control.cartpole import CartPoleEnv

from rl import termination

ENV_ID = 'rl_test/GatedCartPole-v1'
GATE_TIMEOUT_S = 300
_POLL_S = 0.05
# Set once the gate is seen open; a gate is never closed again.
_opened = set()


# Saves made by this process. rl.run writes its checkpoints in the background
# (rl.data.checkpoints), so a step's folder appears a little after its save
# returns: the gate counts the save itself, and a run held at the gate
# finishes writing meanwhile.
_saves = []


def _count_saves():
  from rl.data import checkpoints  # pylint: disable=import-outside-toplevel
  original = checkpoints.Checkpointer.save

  def save(self, *args, **kwargs):
    original(self, *args, **kwargs)
    _saves.append(args[0] if args else kwargs['step'])
  checkpoints.Checkpointer.save = save


_count_saves()


def _has_checkpoint(run_dir):
  """As rl.data.checkpoints' orbax sees it: a finished step folder is named by its number.

  Orbax writes a step into a temporary folder and renames it when complete,
  so a numbered folder is a whole checkpoint. Under a --seeds run's folder, a
  checkpoint of any of its seed_<n> folders counts.
  """
  try:
    names = os.listdir(run_dir)
  except FileNotFoundError:
    return False
  if 'checkpoints' in names:
    return any(name.isdigit() for name in os.listdir(os.path.join(run_dir, 'checkpoints')))
  return any(_has_checkpoint(os.path.join(run_dir, name))
             for name in names if name.startswith('seed_'))


def _run_dir():
  if ('output_dir' not in flags.FLAGS or not flags.FLAGS.is_parsed()
      or not flags.FLAGS['output_dir'].value):
    raise RuntimeError(f'{ENV_ID} runs only under `python -m rl.run --output_dir=...`')
  return flags.FLAGS['output_dir'].value


def _epochs_logged(run_dir):
  try:
    with open(os.path.join(run_dir, 'metrics.jsonl')) as f:
      return sum(1 for line in f if line.endswith('\n'))
  except FileNotFoundError:
    return 0


def _held(after_epochs):
  """Whether the run has got where the gate holds it."""
  if after_epochs is not None:
    return _epochs_logged(_run_dir()) >= after_epochs
  return bool(_saves or _has_checkpoint(_run_dir()))


def wait_at_gate(gate, after_epochs=None, hold_when_stopping=False):
  """Returns at once before the run gets to the gate (its first checkpoint, or `after_epochs`
  epochs logged), once `gate` exists, or once the run is asked to stop (module doc)."""
  if gate in _opened:
    return
  if os.path.exists(gate):
    _opened.add(gate)
    return
  if not _held(after_epochs):
    return
  # Says that this process is held here, past everything its checkpoint did
  # (orbax may still be finishing a save when the step folder appears): a
  # test signals the run only once it sees this file (`waiting`).
  with open(f'{gate}.waiting-{os.getpid()}', 'w'):
    pass
  deadline = time.monotonic() + GATE_TIMEOUT_S
  while not os.path.exists(gate):
    if termination.stop_asked():
      marker = f'{gate}.stop-asked-{os.getpid()}'
      if not os.path.exists(marker):
        with open(marker, 'w'):
          pass
      if not hold_when_stopping:
        return
    if time.monotonic() > deadline:
      raise RuntimeError(f'{ENV_ID}: the gate {gate} was not opened within '
                         f'{GATE_TIMEOUT_S} s; the test should have opened it or '
                         'stopped this run')
    time.sleep(_POLL_S)
  _opened.add(gate)


def waiting(gate):
  """Whether some run is held at `gate` (the markers wait_at_gate leaves)."""
  folder, name = os.path.split(os.path.abspath(gate))
  return any(entry.startswith(name + '.waiting-') for entry in os.listdir(folder))


class GatedCartPole(CartPoleEnv):
  """CartPole-v1 whose steps wait at `gate` once the run has a checkpoint."""

  def __init__(self, gate, after_epochs=None, hold_when_stopping=False, **kwargs):
    super().__init__(**kwargs)
    self.gate = os.path.abspath(gate)
    self.after_epochs = after_epochs
    self.hold_when_stopping = hold_when_stopping

  def step(self, action):
    wait_at_gate(self.gate, self.after_epochs, self.hold_when_stopping)
    return super().step(action)


if ENV_ID not in gym.registry:
  gym.register(ENV_ID, entry_point=GatedCartPole, max_episode_steps=500,
               reward_threshold=475.0)


# JAX-native envs step inside a compiled call, where no Python can wait: with
# the environment variable JAX_GATE_VARIABLE naming a gate file, importing this
# module makes every JAX-native epoch wait at that gate before it starts
# (Learner.collect_and_train), with the same rules as the env's steps above.
JAX_GATE_VARIABLE = 'RL_TEST_JAX_GATE'


def _gate_jax_epochs(gate):
  from rl.learner import learner as learner_lib  # pylint: disable=import-outside-toplevel
  original = learner_lib.Learner.collect_and_train

  def collect_and_train(self, *args, **kwargs):
    wait_at_gate(gate)
    return original(self, *args, **kwargs)
  learner_lib.Learner.collect_and_train = collect_and_train


if os.environ.get(JAX_GATE_VARIABLE):
  _gate_jax_epochs(os.path.abspath(os.environ[JAX_GATE_VARIABLE]))
