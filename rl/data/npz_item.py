"""An orbax checkpoint item that holds a nested dict of numpy arrays as one .npz file.

orbax's own array items (StandardSave, PyTreeSave) write each array through
tensorstore, built for jax.Arrays sharded over many hosts; a save of a
runner's state, host numpy arrays of one process, costs them some 25 ms of
CPU whatever its size, which a run pays at every checkpoint on the cores its
training uses (docs/performance.md). This item writes numpy's own .npz
(uncompressed) in orbax's background commit instead, while orbax's
CheckpointManager keeps what it does for every item: the temporary folder
renamed when complete, the steps kept and deleted, the background write.

Imported when a checkpoint is first written or read (rl.data.checkpoints),
with orbax.
"""
import dataclasses
import json
import os

import numpy as np
import orbax.checkpoint as ocp

FILE = 'arrays.npz'
_PATHS = '__paths__'  # the npz entry listing each array's path in the nested dict


def _flat(tree, path=()):
  """[(path, array)] of a nested dict's leaves, in walk order."""
  if isinstance(tree, dict):
    return [leaf for k, v in tree.items() for leaf in _flat(v, path + (k,))]
  return [(list(path), np.asarray(tree))]


def _nested(leaves):
  tree = {}
  for path, array in leaves:
    node = tree
    for k in path[:-1]:
      node = node.setdefault(k, {})
    node[path[-1]] = array
  return tree


def write(directory, arrays):
  """Writes the nested dict `arrays` (str keys, numpy leaves) to directory/FILE."""
  leaves = _flat(arrays)
  entries = {f'a{i}': array for i, (_, array) in enumerate(leaves)}
  entries[_PATHS] = np.array(json.dumps([path for path, _ in leaves]))
  with open(os.path.join(os.fspath(directory), FILE), 'wb') as f:
    np.savez(f, **entries)


def read(directory):
  """The nested dict of numpy arrays that `write` wrote to `directory`."""
  with np.load(os.path.join(os.fspath(directory), FILE), allow_pickle=False) as npz:
    paths = json.loads(str(npz[_PATHS]))
    return _nested((path, npz[f'a{i}']) for i, path in enumerate(paths))


class NpzHandler(ocp.AsyncCheckpointHandler):
  """Writes an item's arrays as one .npz in orbax's background commit; reads them back."""

  async def async_save(self, directory, args):
    async def commit():
      write(directory, args.arrays)
    return [ocp.future.CommitFutureAwaitingContractedSignals(commit(), name='npz_save')]

  def save(self, directory, args):
    write(directory, args.arrays)

  def restore(self, directory, args=None):
    del args
    return read(directory)

  def metadata(self, directory):
    del directory

  def finalize(self, directory):
    del directory

  def close(self):
    pass


@ocp.args.register_with_handler(NpzHandler, for_save=True)
@dataclasses.dataclass
class NpzSave(ocp.args.CheckpointArgs):
  """The arrays to write: a nested dict with str keys and numpy leaves, not changed until
  the write is finished."""
  arrays: dict


@ocp.args.register_with_handler(NpzHandler, for_restore=True)
@dataclasses.dataclass
class NpzRestore(ocp.args.CheckpointArgs):
  """Reads the arrays back as they were written."""
