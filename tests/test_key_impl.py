"""rl.key_impl: JAX's threefry-2x32 keys with the hash written out, word for word."""
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
  out.append(jax.random.randint(sub, (4,), 0, 2**40, dtype=jnp.int64) if jax.config.jax_enable_x64
             else jax.random.bits(sub, (2, 3), dtype=jnp.uint16))
  # Under vmap (rl.seeds, gymnax's envs).
  several = jax.random.split(key, 4)
  out.append(jax.vmap(lambda k: jax.random.uniform(k, (3,)))(several))
  out.append(jax.random.key_data(jax.vmap(lambda k: jax.random.split(k, 2))(several)))
  out.append(jax.random.key_data(
      jax.vmap(jax.random.fold_in)(several, jnp.arange(4, dtype=jnp.uint32))))
  return out


@pytest.mark.parametrize('seed', [0, 1, 12345, 2**31 - 1, 2**31, 2**32 - 1, -1, -2**31])
def test_the_same_words_as_jax_threefry_op_by_op_and_compiled(seed):
  for got, want in zip(draws(key_impl.IMPL, seed), draws('threefry2x32', seed)):
    np.testing.assert_array_equal(got, want)
  word = np.uint32(seed % 2**32)
  compiled = jax.jit(draws, static_argnums=0)
  for got, want in zip(compiled(key_impl.IMPL, word), compiled('threefry2x32', word)):
    np.testing.assert_array_equal(got, want)


def test_a_split_compiles_without_a_loop():
  key = jax.random.key(0, impl=key_impl.IMPL)
  text = compiler.jit(lambda k: jax.random.split(k, 3)).lower(key).compile().as_text()
  assert 'while' not in text


def test_a_member_of_a_vmap_draws_what_it_draws_alone():
  # What makes a seed's numbers independent of its --seeds batch (rl.seeds).
  several = jax.random.split(jax.random.key(3, impl=key_impl.IMPL), 5)

  def draw(key):
    a, b = jax.random.split(key)
    return (jax.random.uniform(a, (4,)), jax.random.categorical(b, jnp.zeros((3, 6))),
            jax.random.permutation(jax.random.fold_in(b, 9), 8))

  batched = jax.vmap(draw)(several)
  alone = draw(several[2])
  for got, want in zip(batched, alone):
    np.testing.assert_array_equal(got[2], want)
  subset = jax.vmap(draw)(several[1:4])
  for got, want in zip(subset, alone):
    np.testing.assert_array_equal(got[1], want)
