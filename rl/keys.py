"""The runner's PRNG keys: typed JAX keys of one implementation, and their checkpoint form.

Every key the runner makes starts here, so all use one generator, carried by
the keys themselves rather than by a process-wide JAX setting: JAX's
threefry-2x32. Threefry draws each number from its own key alone, so a seed
draws the same numbers alone and inside a `--seeds` batch (`jax.vmap`), and
the same on every backend.
"""
import jax
import jax.numpy as jnp
import numpy as np

from rl import compiler
from rl.errors import ConfigError

IMPL = 'threefry2x32'


@compiler.jit
def _seed_key(seed):
  return jax.random.key(seed, impl=IMPL)


def seed_word(seed):
  """`seed` as the 32-bit word JAX keys it by (np.uint32), for compiled key makers.

  JAX keys a seed by its low 32 bits, so every seed from -2**31 to 2**32 - 1
  gives the key it gives op by op; a seed outside that range is refused.
  """
  seed = int(seed)
  if not -2**31 <= seed < 2**32:
    raise ConfigError(f'seed {seed} is out of range: use a seed from 0 to {2**32 - 1}.')
  return np.uint32(seed % 2**32)


def seed_key(seed):
  """The key of integer `seed`, made by a program of rl.compiler like every other."""
  return _seed_key(seed_word(seed))


@compiler.jit
def _seed_and_folded(seed, data):
  key = jax.random.key(seed, impl=IMPL)
  return key, jax.random.fold_in(key, data)


def seed_and_folded(seed, data):
  """(the key of `seed`, that key folded with the integer `data`), in one compiled call.

  The same keys as `seed_key(seed)` and `jax.random.fold_in(seed_key(seed), data)`.
  """
  return _seed_and_folded(seed_word(seed), np.uint32(data))


def to_data(key):
  """The key's raw uint32 words, as numpy (what checkpoints store)."""
  return np.asarray(jax.random.key_data(key))


def from_data(data, what='key'):
  """The key whose raw words `to_data` gave.

  Raises ConfigError for words of another key implementation (a checkpoint
  written by a version of the runner that used 'rbg' keys).
  """
  data = np.asarray(data)
  expected = jax.random.key_data(seed_key(0)).shape
  if data.shape[-len(expected):] != expected or data.dtype != np.uint32:
    raise ConfigError(
        f'the checkpoint holds a {what} of shape {data.shape} and dtype {data.dtype}, not '
        f"the {IMPL!r} keys this version of rl uses (shape {expected}, uint32): it was "
        'written by an older version; start the run in a new --output_dir.')
  return jax.random.wrap_key_data(jnp.asarray(data), impl=IMPL)
