"""rl.data.checkpoints: round trips and the packing of small arrays."""
import os

import numpy as np
import pytest

from rl.data import checkpoints
from rl.data import npz_item
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
  """The arrays of a step as its file holds them (packed or not)."""
  return npz_item.read(os.path.join(folder, str(step), 'npz'))


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


def standard_save(folder, step, arrays, meta):
  """Writes a step whose arrays are an orbax StandardSave `arrays` item, unpacked."""
  ocp = checkpoints._orbax()  # pylint: disable=protected-access
  np_arrays, empties = checkpoints._to_numpy_tree(arrays)  # pylint: disable=protected-access
  meta = dict(meta, __empty__=empties, __packed__=[])
  with ocp.CheckpointManager(folder) as manager:
    manager.save(step, args=ocp.args.Composite(arrays=ocp.args.StandardSave(np_arrays),
                                               meta=ocp.args.JsonSave(meta)))


def test_a_step_with_a_standard_save_arrays_item_restores(tmp_path):
  folder = str(tmp_path / 'ckpt')
  arrays = example_arrays()
  standard_save(folder, 4, arrays, {'epoch': 4})
  assert {'arrays', 'meta'} <= set(os.listdir(os.path.join(folder, '4')))
  step, restored, meta = Checkpointer(folder).restore_latest()
  assert step == 4 and meta == {'epoch': 4}
  assert_same_tree(arrays, restored)


def test_a_run_of_standard_save_steps_goes_on_in_npz_and_falls_back_across_them(tmp_path):
  folder = str(tmp_path / 'ckpt')
  old = {'w': np.arange(6, dtype=np.float32).reshape(2, 3)}
  standard_save(folder, 1, old, {'epoch': 1})
  saver = Checkpointer(folder, background=True)
  saver.save(2, {'w': old['w'] + 1}, {'epoch': 2})
  saver.close()
  assert os.path.exists(os.path.join(folder, '2', 'npz', npz_item.FILE))
  step, restored, _ = Checkpointer(folder).restore_latest()
  assert step == 2 and restored['w'][0, 0] == 1.0
  # A newest step whose file is damaged is dropped for the StandardSave step before it.
  with open(os.path.join(folder, '2', 'npz', npz_item.FILE), 'wb') as f:
    f.write(b'not an npz')
  step, restored, meta = Checkpointer(folder).restore_latest()
  assert step == 1 and meta == {'epoch': 1}
  assert_same_tree(old, restored)
  assert sorted(os.listdir(folder)) == ['1']
