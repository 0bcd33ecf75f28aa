"""rl.data.checkpoints: round trips and the packing of small arrays."""
import os

import numpy as np
import pytest

from rl.data import checkpoints
from rl.data.checkpoints import Checkpointer


def example_arrays():
  rng = np.random.default_rng(0)
  return {
      'params': {'kernel': rng.normal(size=(5, 3)).astype(np.float32),
                 'bias': np.arange(3, dtype=np.float64)},
      'key': np.array([7, 2**32 - 1], np.uint32),
      'count': np.int32(11),
      'replay': {str(e): {'mask': rng.random(4 + e) < 0.5,
                          'obs': rng.integers(0, 255, size=(4 + e, 3), dtype=np.uint8)}
                 for e in range(3)},
      'frames': rng.integers(0, 255, size=(300, 300), dtype=np.uint8),  # 90 kB
      'empty': np.zeros((0, 4), np.float32),
      'nothing': {},
  }


def assert_same_tree(a, b):
  assert isinstance(b, dict) and sorted(a) == sorted(b)
  for k, v in a.items():
    if isinstance(v, dict):
      assert_same_tree(v, b[k])
    else:
      v = np.asarray(v)
      assert b[k].dtype == v.dtype and b[k].shape == v.shape, k
      np.testing.assert_array_equal(b[k], v)


def stored_arrays(folder, step):
  """The arrays item of a step as orbax holds it (packed or not)."""
  ocp = checkpoints._orbax()  # pylint: disable=protected-access
  with ocp.CheckpointManager(folder, options=ocp.CheckpointManagerOptions(
      read_only=True)) as manager:
    return manager.restore(step, args=ocp.args.Composite(
        arrays=ocp.args.StandardRestore()))['arrays']


def test_small_arrays_are_written_as_one_and_restored_exactly(tmp_path, monkeypatch):
  # Arrays above the limit (the 90 kB frames) keep their own; the rest,
  # whatever their dtype and shape, share one.
  monkeypatch.setattr(checkpoints, 'PACK_BYTES', 10_000)
  folder = str(tmp_path / 'ckpt')
  arrays = example_arrays()
  Checkpointer(folder).save(3, arrays, {'epoch': 3})
  stored = stored_arrays(folder, 3)
  assert sorted(stored) == ['__packed__', 'frames'] and stored['__packed__'].dtype == np.uint8
  step, restored, meta = Checkpointer(folder).restore_latest()
  assert step == 3 and meta == {'epoch': 3}
  assert_same_tree(arrays, restored)
  restored['params']['kernel'][0, 0] = 1.0  # restored arrays are the caller's to change


@pytest.mark.parametrize('limit', [0, 1 << 30])
def test_nothing_or_everything_packed_round_trips(tmp_path, monkeypatch, limit):
  monkeypatch.setattr(checkpoints, 'PACK_BYTES', limit)
  folder = str(tmp_path / 'ckpt')
  arrays = example_arrays()
  saver = Checkpointer(folder)
  saver.save(1, arrays, {})
  saver.save(2, arrays, {})
  assert sorted(os.listdir(folder)) == ['1', '2']
  stored = stored_arrays(folder, 2)
  assert (list(stored) == ['__packed__']) == (limit > 0)
  assert_same_tree(arrays, Checkpointer(folder).restore_latest()[1])
