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
  """Where each leaf of a packed tree sits in the vector (static: known when traced).

  The spans are worked out once, when the tree is packed: unpacking runs
  on the host after every epoch, and a numpy product per leaf shape there
  cost more than the unpacking itself.
  """
  treedef: Any
  shapes: tuple
  dtypes: tuple
  spans: tuple  # (start, end) of each leaf in the vector
  size: int  # elements in the vector


def layout_of(treedef, shapes, dtypes):
  """The Layout of leaves of these shapes and dtypes, packed one after the other."""
  spans, offset = [], 0
  for shape in shapes:
    end = offset + int(np.prod(shape, dtype=np.int64))
    spans.append((offset, end))
    offset = end
  return Layout(treedef, tuple(shapes), tuple(dtypes), tuple(spans), offset)


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
  layout = layout_of(treedef, [leaf.shape for leaf in leaves],
                     [np.dtype(leaf.dtype) for leaf in leaves])
  vector = jnp.concatenate(parts) if parts else jnp.zeros((0,), jnp.uint32)
  return vector, layout


def unpack(vector, layout):
  """The tree `pack` packed, from its vector (read back once) and Layout.

  Leaves come back as numpy arrays, 0-d ones as numpy scalars (indexed out
  of one view of the vector per dtype, rather than a view and a reshape
  each), bit for bit either way.
  """
  vector = np.asarray(vector)
  if vector.shape != (layout.size,):
    raise ValueError(f'a packed vector of shape {vector.shape} does not fit its layout '
                     f'({layout.size} elements)')
  views = {}
  leaves = []
  for (start, end), shape, dtype in zip(layout.spans, layout.shapes, layout.dtypes):
    view = views.get(dtype)
    if view is None:
      view = views[dtype] = vector.astype(bool) if dtype == np.bool_ else vector.view(dtype)
    leaves.append(view[start] if shape == () else view[start:end].reshape(shape))
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
