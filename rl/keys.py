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


def _key_of(seed):
  return jax.random.key(seed, impl=IMPL)


_seed_key = compiler.jit(_key_of)
_seed_keys = compiler.jit(jax.vmap(_key_of))


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


def _key_and_folded(seed, data):
  key = jax.random.key(seed, impl=IMPL)
  return key, jax.random.fold_in(key, data)


_seed_and_folded = compiler.jit(_key_and_folded)
_seeds_and_folded = compiler.jit(jax.vmap(_key_and_folded))


def seed_and_folded(seed, data):
  """(the key of `seed`, that key folded with the integer `data`), in one compiled call.

  The same keys as `seed_key(seed)` and `jax.random.fold_in(seed_key(seed), data)`.
  """
  return _seed_and_folded(seed_word(seed), np.uint32(data))


def seed_keys(seeds):
  """[n] keys, `seed_key` of each integer seed, made in one compiled call."""
  return _seed_keys(np.array([seed_word(seed) for seed in seeds]))


def folded_keys(seeds, data):
  """[n] keys, `seed_and_folded(seeds[i], data[i])[1]` for each i, made in one compiled call.

  One call rather than n matters where calls queue behind a long one: a
  CPU device holds some 32 computations in flight and makes the next
  dispatch wait until the oldest is done (a --seeds batch's evaluation
  inputs, dispatched behind its epochs).
  """
  return _seeds_and_folded(np.array([seed_word(seed) for seed in seeds]),
                           np.array([np.uint32(d) for d in data]))[1]


def is_key(x):
  """Whether `x` is an array of typed PRNG keys."""
  return hasattr(x, 'dtype') and jax.dtypes.issubdtype(x.dtype, jax.dtypes.prng_key)


def wrap_words(words):
  """The keys of raw uint32 words (numpy) of this module's keys, made without a device
  computation (one would wait behind the calls queued on the device)."""
  return jax.random.wrap_key_data(np.asarray(words, np.uint32), impl=IMPL)


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
