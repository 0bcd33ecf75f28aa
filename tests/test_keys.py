"""rl.keys: the runner's typed keys and their checkpoint form."""
import jax
import numpy as np
import pytest

from rl import keys
from rl.errors import ConfigError


def test_seed_key_is_a_typed_key_of_the_runner_impl_and_deterministic():
  key = keys.seed_key(3)
  assert jax.dtypes.issubdtype(key.dtype, jax.dtypes.prng_key)
  assert str(jax.random.key_impl(key)) == str(jax.random.key_impl(jax.random.key(0, impl=keys.IMPL)))
  a = jax.random.uniform(keys.seed_key(3), (4,))
  b = jax.random.uniform(keys.seed_key(3), (4,))
  c = jax.random.uniform(keys.seed_key(4), (4,))
  np.testing.assert_array_equal(a, b)
  assert not np.array_equal(a, c)


def test_checkpoint_form_round_trips_to_the_same_stream():
  key = jax.random.fold_in(keys.seed_key(7), 2)
  data = keys.to_data(key)
  assert isinstance(data, np.ndarray) and data.dtype == np.uint32
  restored = keys.from_data(data)
  np.testing.assert_array_equal(jax.random.normal(restored, (5,)), jax.random.normal(key, (5,)))


def test_a_key_of_another_implementation_is_refused_with_one_line():
  old = np.asarray(jax.random.key_data(jax.random.key(0, impl='rbg')))
  with pytest.raises(ConfigError) as info:
    keys.from_data(old, 'training key')
  message = str(info.value)
  assert 'training key' in message and 'new --output_dir' in message
  assert '\n' not in message


def test_seed_and_folded_makes_the_same_keys_as_op_by_op():
  for seed, data in ((0, 2), (5, 1_000_003 * 7 + 1)):
    key, folded = keys.seed_and_folded(seed, data)
    np.testing.assert_array_equal(keys.to_data(key), keys.to_data(keys.seed_key(seed)))
    np.testing.assert_array_equal(
        keys.to_data(folded), keys.to_data(jax.random.fold_in(keys.seed_key(seed), data)))


def test_seed_key_is_the_op_by_op_key_of_the_seed_over_the_whole_range():
  for seed in (0, 1, 2**31 - 1, 2**31, 3_884_055_042, 2**32 - 1, -1, -2**31):
    want = np.asarray(jax.random.key_data(jax.random.key(seed, impl=keys.IMPL)))
    np.testing.assert_array_equal(keys.to_data(keys.seed_key(seed)), want, err_msg=str(seed))
    key, _ = keys.seed_and_folded(seed, 1)
    np.testing.assert_array_equal(keys.to_data(key), want, err_msg=str(seed))
  for seed in (2**32, -2**31 - 1):
    with pytest.raises(ConfigError, match='out of range'):
      keys.seed_key(seed)


def test_keys_made_together_are_those_made_one_by_one():
  seeds, data = [0, 7, 2**32 - 1], [2, 1_000_003 * 9 + 1, 5]
  np.testing.assert_array_equal(
      keys.to_data(keys.folded_keys(seeds, data)),
      np.stack([keys.to_data(keys.seed_and_folded(s, d)[1]) for s, d in zip(seeds, data)]))
  np.testing.assert_array_equal(keys.to_data(keys.seed_keys(seeds)),
                                np.stack([keys.to_data(keys.seed_key(s)) for s in seeds]))


def test_keys_wrapped_from_their_words_draw_the_same_numbers():
  key = jax.random.fold_in(keys.seed_key(4), 3)
  assert keys.is_key(key) and not keys.is_key(keys.to_data(key)) and not keys.is_key(1.0)
  wrapped = keys.wrap_words(keys.to_data(key))
  assert keys.is_key(wrapped)
  np.testing.assert_array_equal(jax.random.uniform(wrapped, (3,)), jax.random.uniform(key, (3,)))
