"""rl.key_impl: JAX's 'rbg' keys with the threefry hash written out, word for word."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from rl import compiler
from rl import key_impl


def draws(impl, seed):
  """Keys and random numbers of every kind the runner makes, from `seed`."""
  key = jax.random.key(seed, impl=impl)
  out = [jax.random.key_data(key)]
  key, sub = jax.random.split(key)
  out.append(jax.random.key_data(jax.random.split(sub, 5)))
  out.append(jax.random.key_data(jax.random.split(sub, (3, 2))))
  out.append(jax.random.key_data(jax.random.fold_in(key, 7)))
  out.append(jax.random.key_data(jax.random.fold_in(key, 2**32 - 1)))
  out.append(jax.random.randint(sub, (9,), 0, 1000))
  out.append(jax.random.uniform(key, (9,)))
  out.append(jax.random.normal(key, (3, 2)))
  out.append(jax.random.bernoulli(key, 0.3, (5,)))
  out.append(jax.random.categorical(sub, jnp.zeros((4, 3))))
  out.append(jax.random.permutation(sub, 10))
  # Under vmap (rl.seeds, gymnax's envs).
  several = jax.random.split(key, 4)
  out.append(jax.vmap(lambda k: jax.random.uniform(k, (3,)))(several))
  out.append(jax.random.key_data(jax.vmap(lambda k: jax.random.split(k, 2))(several)))
  out.append(jax.random.key_data(
      jax.vmap(jax.random.fold_in)(several, jnp.arange(4, dtype=jnp.uint32))))
  return out


@pytest.mark.parametrize('seed', [0, 1, 12345, 2**31 - 1, 2**31, 2**32 - 1, -1, -2**31])
def test_the_same_words_as_jax_rbg_op_by_op_and_compiled(seed):
  for got, want in zip(draws(key_impl.IMPL, seed), draws('rbg', seed)):
    np.testing.assert_array_equal(got, want)
  word = np.uint32(seed % 2**32)
  compiled = jax.jit(draws, static_argnums=0)
  for got, want in zip(compiled(key_impl.IMPL, word), compiled('rbg', word)):
    np.testing.assert_array_equal(got, want)


def test_a_split_compiles_without_a_loop():
  key = jax.random.key(0, impl=key_impl.IMPL)
  text = compiler.jit(lambda k: jax.random.split(k, 3)).lower(key).compile().as_text()
  assert 'while' not in text
