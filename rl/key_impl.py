"""The runner's PRNG key implementation: JAX's 'rbg' keys with their threefry hash written out.

'rbg' splits and folds keys with the threefry hash, which JAX lowers on CPU
as a loop of tiny kernels; written out, its rounds fuse into one kernel, and
the runner splits keys at every acting step and batch draw
(docs/performance.md). The same words as JAX's 'rbg' (tests/test_key_impl.py),
through the public jax.extend.random, for the runner's keys only.
"""
import jax
import jax.extend.random
import jax.numpy as jnp
import numpy as np
from jax import lax

NAME = 'rl_rbg'

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
  # JAX's threefry seed: the integer's high and low 32-bit words, once per half.
  if seed.dtype.itemsize == 8:
    high = lax.shift_right_logical(seed, np.array(32, seed.dtype))
    low = jnp.bitwise_and(seed, np.array(0xFFFFFFFF, seed.dtype))
  else:
    high, low = jnp.zeros_like(seed), seed
  half = jnp.stack([lax.convert_element_type(high, np.uint32),
                    lax.convert_element_type(low, np.uint32)])
  return jnp.concatenate([half, half])


def _split(key, shape):
  # Each half of the key hashes the counts 0, 1, ... on its own.
  halves = key.reshape(2, 2)
  counts = lax.iota(np.uint32, int(np.prod(shape))).reshape(*shape, 1)
  x1, x2 = _threefry(halves[:, 0], halves[:, 1], jnp.zeros_like(counts), counts)
  return jnp.stack([x1, x2], axis=-1).reshape(*shape, 4)


def _fold_in(key, data):
  halves = key.reshape(2, 2)
  data = jnp.broadcast_to(jnp.asarray(data, np.uint32), (2,))
  x1, x2 = _threefry(halves[:, 0], halves[:, 1], jnp.zeros((2,), np.uint32), data)
  return jnp.stack([x1, x2], axis=-1).reshape(4)


def _random_bits(key, bit_width, shape):
  return lax.rng_bit_generator(key, shape, dtype=np.dtype(f'uint{bit_width}'))[1]


IMPL = jax.extend.random.define_prng_impl(
    key_shape=(4,), seed=_seed, split=_split, random_bits=_random_bits, fold_in=_fold_in,
    name=NAME, tag=NAME)
