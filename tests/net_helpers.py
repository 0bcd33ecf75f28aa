"""What the nets tests share: a stand-in distribution, a small observation
batch, and initialisation as the models' users call it."""
import jax
import jax.numpy as jnp

from rl.nets.variables import init_variables


class FakeDistribution:
  """Stand-in for rl.ops.distributions objects: models only read `n_inputs`."""

  def __init__(self, n_inputs):
    self.n_inputs = n_inputs


OBS = jnp.arange(6, dtype=jnp.float32).reshape(2, 1, 3) / 6.0

# Orthogonal init compiles a QR per new kernel shape, so the tests reuse the
# default body (3 -> 64 -> 64) and a few head sizes.
N = 4


def init(model, *extra, obs=OBS, key=0):
  # Eager: the orthogonal initialiser is itself jitted and cached per kernel
  # shape, so models sharing shapes reuse its compiled QR.
  return init_variables(model, jax.random.key(key), obs, *extra)


def shapes(tree):
  return jax.tree_util.tree_map(lambda a: tuple(a.shape), tree)
