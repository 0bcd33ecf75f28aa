"""Many small device arrays read back as one: packed on the device, unpacked on the host.

An epoch's results are every network's per-step losses and gradient norms,
its metrics, learning rate and step count: 20 to 40 small arrays. Read back
with `jax.device_get`, each is a transfer of its own (about 25 us apiece on
the CPU), and the host waits for every one: a millisecond an epoch, which is
a tenth of a PPO CartPole epoch's training. Packed into one uint32 vector
inside the compiled call, they come back in one transfer, bit for bit:
32-bit leaves are bitcast, not converted, and booleans travel as 0 or 1.
"""
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from rl import compiler


class Layout(NamedTuple):
  """Where each leaf of a packed tree sits in the vector (static: known when traced)."""
  treedef: Any
  shapes: tuple
  dtypes: tuple

  @property
  def size(self):
    return sum(int(np.prod(shape, dtype=np.int64)) for shape in self.shapes)


def pack(tree):
  """(one uint32 vector holding every leaf of `tree`, its Layout); pure, for use under jit.

  Leaves must be 32-bit or boolean (the results of a JAX computation
  without x64); anything else raises TypeError.
  """
  leaves, treedef = jax.tree_util.tree_flatten(tree)
  leaves = [jnp.asarray(leaf) for leaf in leaves]
  parts = []
  for leaf in leaves:
    if leaf.dtype == jnp.bool_:
      parts.append(leaf.astype(jnp.uint32).ravel())
    elif leaf.dtype.itemsize == 4:
      parts.append(jax.lax.bitcast_convert_type(leaf, jnp.uint32).ravel())
    else:
      raise TypeError(f'cannot pack a leaf of dtype {leaf.dtype}: only 32-bit and bool leaves')
  layout = Layout(treedef, tuple(leaf.shape for leaf in leaves),
                  tuple(np.dtype(leaf.dtype) for leaf in leaves))
  vector = jnp.concatenate(parts) if parts else jnp.zeros((0,), jnp.uint32)
  return vector, layout


def unpack(vector, layout):
  """The tree `pack` packed, as numpy arrays, from its vector (read back once) and Layout."""
  vector = np.asarray(vector)
  if vector.shape != (layout.size,):
    raise ValueError(f'a packed vector of shape {vector.shape} does not fit its layout '
                     f'({layout.size} elements)')
  leaves, offset = [], 0
  for shape, dtype in zip(layout.shapes, layout.dtypes):
    n = int(np.prod(shape, dtype=np.int64))
    words = vector[offset:offset + n]
    offset += n
    leaf = words.astype(bool) if dtype == np.bool_ else words.view(dtype)
    leaves.append(leaf.reshape(shape))
  return jax.tree_util.tree_unflatten(layout.treedef, leaves)


class PackedJit:
  """`compiler.jit(fn)` for fn -> (kept, to_host): `to_host` comes back packed, as numpy.

  A call returns (kept, to_host): `kept` as fn returns it (device arrays),
  `to_host` read back in one transfer. The layout is recorded when fn is
  traced (as jax.jit records its output structure); it depends only on the
  structure of fn's `to_host`, not on the shapes of its inputs.
  """

  def __init__(self, fn):
    self._fn = fn
    self._layout = None
    self._jitted = compiler.jit(self._packed)

  def _packed(self, *args):
    kept, to_host = self._fn(*args)
    vector, self._layout = pack(to_host)
    return kept, vector

  def __call__(self, *args):
    kept, vector = self._jitted(*args)
    return kept, unpack(vector, self._layout)
