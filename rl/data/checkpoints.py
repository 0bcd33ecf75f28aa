"""Checkpoints through orbax: atomic, the last few kept, fallback on a bad newest one.

A checkpoint is one orbax step holding two items: `npz` (a nested dict of
numpy arrays: parameters, optimizer state, replay epochs, RNG keys, written
as one .npz file by rl.data.npz_item) and `meta` (JSON: counters, numpy
generator states, the config). Orbax writes into a temporary folder and
renames it when complete, so a run killed mid-write leaves the previous
checkpoint as the newest complete one. Steps whose arrays are an `arrays`
item (orbax's StandardSave) are read too.

Every array is an entry of its own in the file, with its own header, and a
replay buffer is many small arrays (every field of every stored epoch). So
arrays of at most PACK_BYTES are written together as the bytes of one array,
with their paths, dtypes, shapes and offsets in `meta`; bigger ones (frames of
pixel observations) stay arrays of their own, so packing never copies much.

With `background=True` (a run's own checkpoints) a save returns once its
arrays are copied and orbax's write has started; the write goes on beside the
next epochs and is finished (its failure raised) by the next save or `wait`.

orbax is imported at the first save or restore of a folder that holds a
checkpoint, not with this module: it takes a few tenths of a second to
import, and a new run reaches its first epoch without it.
"""
import logging
import os
import shutil

import jax
import numpy as np

from rl.errors import WriteFailed
from rl.errors import write_failure_reason

_EMPTY = '__empty__'
_PACKED = '__packed__'
# Arrays up to this size are written as bytes of one packed array (see above).
PACK_BYTES = 1 << 20


def _to_numpy_tree(tree):
  """Nested dict of numpy arrays; zero-size arrays and empty dicts are recorded aside.

  Orbax refuses zero-size arrays, and empty containers don't round-trip, so
  they travel in the JSON metadata as (path, shape, dtype).
  """
  empties = []

  def walk(node, path):
    if isinstance(node, dict):
      if not node:
        empties.append([path, None, None])
        return None
      out = {}
      for k, v in node.items():
        r = walk(v, path + [str(k)])
        if r is not None:
          out[str(k)] = r
      return out or None
    arr = np.asarray(jax.device_get(node))
    if arr.size == 0:
      empties.append([path, list(arr.shape), arr.dtype.str])
      return None
    return arr

  return walk(tree, []) or {}, empties


def _restore_empties(tree, empties):
  for path, shape, dtype in empties:
    node = tree
    for k in path[:-1]:
      node = node.setdefault(k, {})
    value = {} if shape is None else np.zeros(shape, np.dtype(dtype))
    if path:
      node[path[-1]] = value
  return tree


def _pack_small(tree, limit=None, copy=False):
  """(tree without its arrays of at most `limit` bytes, packed index).

  The small arrays' bytes go, in walk order, into one uint8 array at
  tree[_PACKED]; the index lists [path, dtype, shape, byte offset] of each.
  Dicts left empty are dropped (`_unpack_small` makes them again). With
  `copy`, the arrays left in the tree are copies too, so the caller may
  change its own while the tree is written.
  """
  limit = PACK_BYTES if limit is None else limit
  index, chunks, offset = [], [], 0

  def walk(node, path):
    nonlocal offset
    if isinstance(node, dict):
      out = {}
      for k, v in node.items():
        r = walk(v, path + [k])
        if r is not None:
          out[k] = r
      return out or None
    if node.nbytes > limit:
      return np.array(node, copy=True) if copy else node
    data = np.ascontiguousarray(node).view(np.uint8).reshape(-1)
    index.append([path, node.dtype.str, list(node.shape), offset])
    chunks.append(data)
    offset += data.size
    return None

  out = walk(tree, []) or {}
  if chunks:
    out[_PACKED] = np.concatenate(chunks)
  return out, index


def _unpack_small(tree, index):
  """The inverse of `_pack_small`: each packed array back at its path (a copy)."""
  blob = tree.pop(_PACKED, None)
  for path, dtype, shape, offset in index:
    dtype = np.dtype(dtype)
    size = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
    array = blob[offset:offset + size].view(dtype).reshape(shape).copy()
    node = tree
    for k in path[:-1]:
      node = node.setdefault(k, {})
    node[path[-1]] = array
  return tree


def _orbax():
  # Imported here, not at the top: it takes tenths of a second that a run
  # would otherwise spend before its first epoch.
  import orbax.checkpoint as ocp  # pylint: disable=import-outside-toplevel
  return ocp


def _npz_item():
  from rl.data import npz_item  # pylint: disable=import-outside-toplevel  (imports orbax)
  return npz_item


class Checkpointer:
  """Saves and restores (arrays, meta) pairs under `directory`.

  The orbax manager is made at the first call that needs it: a save, or a
  restore or listing of a folder that holds a numbered (finished) step. A
  missing or empty folder is answered without it (no steps, nothing to
  restore), and the folder is created by the first save.
  """

  def __init__(self, directory, max_to_keep=3, read_only=False, background=False):
    """read_only: never create, write or delete anything (rl.evaluate reads runs).
    background: saves write in the background (module doc)."""
    # orbax wants absolute paths (a relative --output_dir is the common case).
    self._directory = os.path.abspath(directory)
    self._max_to_keep = max_to_keep
    self._read_only = read_only
    self._background = background
    self._in_flight = None  # the step being written, if any
    self._manager_ = None

  @property
  def _manager(self):
    if self._manager_ is None:
      ocp = _orbax()
      # A read-only manager makes orbax warn through absl that it will not
      # save or delete, which is what read_only asks for (rl.evaluate, rl.agent).
      absl_logger = logging.getLogger('absl')
      level = absl_logger.level
      if self._read_only:
        absl_logger.setLevel(max(level, logging.ERROR))
      try:
        options = ocp.CheckpointManagerOptions(
            max_to_keep=self._max_to_keep, create=not self._read_only,
            read_only=self._read_only,
            # A background save writes copies of the arrays (`save`), so the
            # next epochs may change the run's own.
            enable_async_checkpointing=self._background)
        self._manager_ = ocp.CheckpointManager(self._directory, options=options)
      finally:
        absl_logger.setLevel(level)
    return self._manager_

  def _may_hold_steps(self):
    """False when the folder surely holds no step: missing, or no entry named by a number.

    orbax names a finished step by its number (the default step format) and
    writes it under another name first, so without such an entry it would
    list no step either.
    """
    if self._manager_ is not None:
      return True
    try:
      return any(name.isdigit() for name in os.listdir(self._directory))
    except (FileNotFoundError, NotADirectoryError):
      return False

  def all_steps(self):
    if not self._may_hold_steps():
      return []
    return sorted(self._manager.all_steps())

  def save(self, step, arrays, meta):
    """Writes checkpoint `step`, or raises WriteFailed leaving no part of it on disk.

    In the background (module doc), the write of the save before is finished
    first, and its failure is the WriteFailed raised. The arrays are copied;
    `meta` is written as given, so the caller must not change it afterwards.
    """
    self.wait()
    ocp = _orbax()
    np_arrays, empties = _to_numpy_tree(arrays)
    np_arrays, packed = _pack_small(np_arrays, copy=self._background)
    meta = dict(meta, **{_EMPTY: empties, _PACKED: packed})
    self._in_flight = step
    _quiet_absl(True)
    try:
      self._manager.save(step, args=ocp.args.Composite(
          npz=_npz_item().NpzSave(np_arrays), meta=ocp.args.JsonSave(meta)))
    except BaseException as e:  # pylint: disable=broad-except
      self._in_flight = None
      _quiet_absl(False)
      self._failed(step, e)
    if not self._background:
      self.wait()

  def wait(self):
    """Finishes the checkpoint being written, if any; WriteFailed (its folder removed) if it
    failed."""
    if self._in_flight is None:
      return
    step, self._in_flight = self._in_flight, None
    try:
      self._manager.wait_until_finished()
    except BaseException as e:  # pylint: disable=broad-except
      self._failed(step, e)
    finally:
      _quiet_absl(False)

  def _failed(self, step, error):
    """Removes what the failed save of `step` left, then raises: a Ctrl-C or SIGTERM
    (rl.termination) as it came, anything else as WriteFailed."""
    self._remove_unfinished(step)
    if not isinstance(error, Exception):
      raise error
    raise WriteFailed(f'checkpoint {step} to {self._directory}',
                      write_failure_reason(error)) from None

  def _remove_unfinished(self, step):
    """Deletes what a failed save of `step` left: orbax's temporary folder of it.

    orbax would delete it at the next save of the same step, but until then
    it takes disk space, and its name looks like a checkpoint to a user.
    """
    try:
      names = os.listdir(self._directory)
    except OSError:
      return
    for name in names:
      if name.startswith(f'{step}.orbax-checkpoint-tmp'):
        shutil.rmtree(os.path.join(self._directory, name), ignore_errors=True)

  def restore_latest(self):
    """Returns (step, arrays, meta) of the newest readable checkpoint, or None.

    A newest checkpoint that cannot be read (corrupted, partly deleted) is
    skipped with a warning and removed, so the run continues from the one
    before and its later saves don't collide with the bad step.
    """
    for step in reversed(self.all_steps()):
      try:
        return self.restore(step)
      except Exception as e:  # pylint: disable=broad-except
        logging.warning('checkpoint %d is unreadable (%s: %s); falling back to the '
                        'previous one', step, type(e).__name__, str(e).splitlines()[0][:200])
        if not self._read_only:
          self._manager.delete(step)
    return None

  def restore(self, step):
    """Returns (step, arrays, meta) of checkpoint `step`, one of `all_steps()`; orbax's error
    if it cannot be read."""
    ocp = _orbax()
    restored = self._manager.restore(step, args=ocp.args.Composite(
        meta=ocp.args.JsonRestore(), **self._arrays_item(step)))
    meta = dict(restored['meta'])
    empties = meta.pop(_EMPTY)
    arrays = restored['npz'] if 'npz' in restored else _numpy_dicts(restored['arrays'])
    arrays = _unpack_small(arrays, meta.pop(_PACKED))
    arrays = _restore_empties(arrays, empties)
    return step, arrays, meta

  def _arrays_item(self, step):
    """The restore args of step's arrays: the `npz` item, or a StandardSave `arrays` item."""
    if os.path.isdir(os.path.join(self._directory, str(step), 'arrays')):
      return {'arrays': _orbax().args.StandardRestore()}
    return {'npz': _npz_item().NpzRestore()}

  def settle(self):
    """Finishes a write in progress, failed or not (its failure is dropped: a run reports
    it with `wait`, unless it is stopping anyway)."""
    try:
      self.wait()
    except WriteFailed:
      pass

  def close(self):
    """Settles a write in progress and releases orbax."""
    try:
      self.settle()
    finally:
      if self._manager_ is not None:
        self._manager_.close()


# orbax logs a failed write at ERROR, with its traceback, from the thread that
# wrote; WriteFailed reports it in one line. absl's logger is quiet while any
# checkpoint of this process is being written (a --seeds job writes several).
_writes_in_flight = [0, None]  # [count, absl's level before the first]


def _quiet_absl(starting):
  logger = logging.getLogger('absl')
  if starting:
    if not _writes_in_flight[0]:
      _writes_in_flight[1] = logger.level
      logger.setLevel(logging.CRITICAL)
    _writes_in_flight[0] += 1
  else:
    _writes_in_flight[0] -= 1
    if not _writes_in_flight[0]:
      logger.setLevel(_writes_in_flight[1])


def _numpy_dicts(tree):
  if isinstance(tree, dict):
    return {k: _numpy_dicts(v) for k, v in tree.items()}
  return np.asarray(tree)
