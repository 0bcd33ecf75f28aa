"""The runner's PRNG key implementation: JAX's threefry-2x32 keys with the hash written out.

Threefry draws every number by hashing its position under the key, so a draw
depends only on its own key: a seed trained alone and the same seed inside a
`--seeds` batch (`jax.vmap`) draw the same numbers. JAX lowers the hash on CPU
as a loop of tiny kernels; written out, its twenty rounds fuse into one kernel,
and the runner draws and splits keys at every acting step and batch draw
(docs/performance.md). The words are JAX's 'threefry2x32' ones
(tests/test_key_impl.py), through the public jax.extend.random, for the
runner's keys only.
"""
import jax
import jax.extend.random
import jax.numpy as jnp
import numpy as np
from jax import lax

NAME = 'rl_threefry'

# Threefry-2x32's rotations, by round, in the two alternating groups of four.
_ROTATIONS = ((13, 15, 26, 6), (17, 29, 16, 24))


# Jitted: inside a program it is one function, called by every key operation of
# the shape, rather than the rounds written out at each (the program compiles faster).
@jax.jit
def _threefry(k1, k2, x1, x2):
  """Threefry-2x32 of the counts (x1, x2) under the key (k1, k2), all uint32."""
  ks = (k1, k2, k1 ^ k2 ^ np.uint32(0x1BD11BDA))
  x1, x2 = x1 + ks[0], x2 + ks[1]
  for i in range(5):
    for r in _ROTATIONS[i % 2]:
      x1 = x1 + x2
      x2 = x1 ^ ((x2 << np.uint32(r)) | (x2 >> np.uint32(32 - r)))
    x1 = x1 + ks[(i + 1) % 3]
    x2 = x2 + ks[(i + 2) % 3] + np.uint32(i + 1)
  return x1, x2


def _seed(seed):
  # The integer's high and low 32-bit words.
  if seed.dtype.itemsize == 8:
    high = lax.shift_right_logical(seed, np.array(32, seed.dtype))
    low = jnp.bitwise_and(seed, np.array(0xFFFFFFFF, seed.dtype))
  else:
    high, low = jnp.zeros_like(seed), seed
  return jnp.stack([lax.convert_element_type(high, np.uint32),
                    lax.convert_element_type(low, np.uint32)])


def _counts(shape):
  # The positions 0, 1, ... of an array of `shape`, as the high and low words of
  # a 64-bit count (the high word is zero below 2**32 draws).
  size = int(np.prod(shape))
  if size >= 2**32:
    raise ValueError(f'cannot draw {size:,} numbers from one key; split the key first')
  low = lax.iota(np.uint32, size).reshape(shape)
  return jnp.zeros_like(low), low


def _split(key, shape):
  x1, x2 = _threefry(key[0], key[1], *_counts(shape))
  return jnp.stack([x1, x2], axis=-1)


def _fold_in(key, data):
  # The hash of the count pair (0, data).
  x1, x2 = _threefry(key[0], key[1], np.uint32(0), jnp.asarray(data, np.uint32))
  return jnp.stack([x1, x2])


def _random_bits(key, bit_width, shape):
  x1, x2 = _threefry(key[0], key[1], *_counts(shape))
  dtype = np.dtype(f'uint{bit_width}')
  if bit_width == 64:
    return (x1.astype(dtype) << np.uint64(32)) | x2.astype(dtype)
  return (x1 ^ x2).astype(dtype)


IMPL = jax.extend.random.define_prng_impl(
    key_shape=(2,), seed=_seed, split=_split, random_bits=_random_bits, fold_in=_fold_in,
    name=NAME, tag=NAME)
