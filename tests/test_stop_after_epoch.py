"""A Ctrl-C or SIGTERM on JAX-native envs: the run books the epochs its device computed up to
the next one whose state it holds, checkpoints that one, stops, and resumes from it exactly.

The signal's flag (rl.termination.stop_asked) is set here while epoch 2 is booked, in the
test's process; tests/test_sigterm.py sends real signals to gymnasium runs.
"""
import os

import gin
import pytest

from rl import experiment
from rl import termination
from rl.errors import Interrupted
from rl.learner import loop as loop_lib
from rl.metrics import TIMING_KEYS
from rl.metrics import read_metrics
from run_helpers import PPO_JAX
from run_helpers import TINY_PPO_JAX

pytest.importorskip('gymnax')

# No evaluation or checkpoint before the last epoch: epochs 2-11 run as one call.
BINDINGS = ['train_rl.n_epochs = 14', 'train_rl.checkpoint_every = 100',
            'PPO.eval_every = 100', *TINY_PPO_JAX]


@pytest.fixture(autouse=True)
def clean_gin():
  gin.clear_config()
  yield
  gin.clear_config()


@pytest.fixture
def stop_asked_in_epoch_2(monkeypatch):
  """Makes the run's stop flag rise while epoch 2 is booked, as a signal there would."""
  asked = []
  finish = loop_lib.EpochLoop.finish

  def finish_then_ask(loop, record, epoch_start):
    if record['epoch'] == 2:
      asked.append(True)
    return finish(loop, record, epoch_start)
  monkeypatch.setattr(loop_lib.EpochLoop, 'finish', finish_then_ask)
  monkeypatch.setattr(termination, 'stop_asked', lambda: bool(asked))
  return monkeypatch


def numbers(folder):
  return [{k: v for k, v in r.items() if k not in TIMING_KEYS and 'per_second' not in k}
          for r in read_metrics(folder)]


def checkpoints(folder):
  return sorted(int(n) for n in os.listdir(os.path.join(folder, 'checkpoints')) if n.isdigit())


def test_a_run_stops_at_the_end_of_the_call_under_way_and_resumes_exactly(
    tmp_path, stop_asked_in_epoch_2):
  out = str(tmp_path / 'run')
  with pytest.raises(Interrupted) as stopped:
    experiment.execute([PPO_JAX], BINDINGS, out)
  # Epoch 2 is the first of a call of ten: its last, 11, is the first state at hand.
  assert str(stopped.value) == (
      f"stopped after epoch 11/14, checkpointed ({os.path.join(out, 'checkpoints', '11')}): "
      'rerun the same command to resume from it.')
  assert checkpoints(out) == [11]
  assert [r['epoch'] for r in read_metrics(out)] == list(range(1, 12))

  stop_asked_in_epoch_2.undo()
  gin.clear_config()
  experiment.execute([PPO_JAX], BINDINGS, out)
  gin.clear_config()
  straight = str(tmp_path / 'straight')
  experiment.execute([PPO_JAX], BINDINGS, straight)
  assert numbers(out) == numbers(straight)


def test_a_seeds_batch_stops_every_seed_at_the_same_epoch_and_resumes_exactly(
    tmp_path, stop_asked_in_epoch_2):
  out = tmp_path / 'seeds'
  with pytest.raises(Interrupted) as stopped:
    experiment.execute_seeds([PPO_JAX], BINDINGS, str(out), [0, 1])
  assert str(stopped.value).startswith(
      'interrupted: seed_0 after epoch 11/14 (checkpointed); seed_1 after epoch 11/14 '
      '(checkpointed), under ')
  for seed in (0, 1):
    assert checkpoints(out / f'seed_{seed}') == [11]

  stop_asked_in_epoch_2.undo()
  gin.clear_config()
  experiment.execute_seeds([PPO_JAX], BINDINGS, str(out), [0, 1])
  gin.clear_config()
  straight = tmp_path / 'straight'
  experiment.execute_seeds([PPO_JAX], BINDINGS, str(straight), [0, 1])
  for seed in (0, 1):
    assert numbers(out / f'seed_{seed}') == numbers(straight / f'seed_{seed}')
