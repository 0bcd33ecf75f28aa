"""Tests for rl.optim.lr_schedules.multifactor against hand-computed values."""

import math

import gin
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from rl.optim import lr_schedules
from rl.optim.lr_schedules import multifactor


@pytest.fixture(autouse=True)
def _clean_gin():
  # multifactor is gin-configurable; a binding left by one test would silently
  # change the defaults every other test relies on.
  gin.clear_config()
  yield
  gin.clear_config()


def _values(schedule, steps):
  return [float(schedule(s)) for s in steps]


def test_default_factors_are_constant_warmup_rsqrt():
  schedule = multifactor()
  # 0.1 * min(1, step/400) / sqrt(max(step, 400))
  assert float(schedule(0)) == 0.0
  assert float(schedule(200)) == pytest.approx(0.1 * 0.5 / 20.0, rel=1e-6)
  assert float(schedule(400)) == pytest.approx(0.1 / 20.0, rel=1e-6)
  assert float(schedule(1600)) == pytest.approx(0.1 / 40.0, rel=1e-6)


def test_constant():
  schedule = multifactor(factors='constant', constant=0.25)
  assert _values(schedule, [0, 1, 10**6]) == [0.25, 0.25, 0.25]


def test_two_constants_switches_at_second_constant_step():
  schedule = multifactor(
      factors='two_constants', constant=0.5, second_constant=0.125,
      second_constant_step=10)
  assert _values(schedule, [0, 9, 10, 11, 1000]) == [
      0.5, 0.5, 0.125, 0.125, 0.125]


def test_constant_times_two_constants_multiplies_constant_twice():
  # The reference multiplies by `constant` in both factors; keep that.
  schedule = multifactor(
      factors='constant * two_constants', constant=0.5, second_constant=0.25,
      second_constant_step=3)
  assert _values(schedule, [2, 3]) == [0.25, 0.125]


def test_constant_times_linear_warmup():
  schedule = multifactor(
      factors='constant * linear_warmup', constant=2.0, warmup_steps=100)
  assert _values(schedule, [0, 50, 100, 200]) == [0.0, 1.0, 2.0, 2.0]


def test_linear_warmup_with_zero_warmup_steps_is_one():
  schedule = multifactor(factors='linear_warmup', warmup_steps=0)
  assert _values(schedule, [0, 5]) == [1.0, 1.0]


def test_rsqrt_decay_floors_step_at_warmup():
  schedule = multifactor(factors='rsqrt_decay', warmup_steps=100)
  assert float(schedule(0)) == pytest.approx(0.1, rel=1e-6)
  assert float(schedule(100)) == pytest.approx(0.1, rel=1e-6)
  assert float(schedule(400)) == pytest.approx(0.05, rel=1e-6)


def test_rsqrt_normalized_decay_is_one_until_warmup():
  schedule = multifactor(factors='rsqrt_normalized_decay', warmup_steps=100)
  assert float(schedule(0)) == pytest.approx(1.0, rel=1e-6)
  assert float(schedule(100)) == pytest.approx(1.0, rel=1e-6)
  assert float(schedule(400)) == pytest.approx(0.5, rel=1e-6)
  assert float(schedule(10000)) == pytest.approx(0.1, rel=1e-6)


def test_decay_every_is_a_staircase():
  schedule = multifactor(
      factors='decay_every', decay_factor=0.5, steps_per_decay=10)
  assert _values(schedule, [0, 9, 10, 19, 20, 35]) == [
      1.0, 1.0, 0.5, 0.5, 0.25, 0.125]


def test_decay_every_is_exact_just_before_a_boundary_at_large_steps():
  # 16_999_999 is not representable in float32 (it rounds to 17_000_000), so
  # a float quotient would already apply the 17th decay; integer floor
  # division must still give 16.
  schedule = multifactor(
      factors='decay_every', decay_factor=0.5, steps_per_decay=1_000_000)
  assert float(schedule(jnp.int32(16_999_999))) == 0.5 ** 16
  assert float(jax.jit(schedule)(jnp.int32(16_999_999))) == 0.5 ** 16
  assert float(schedule(17_000_000)) == 0.5 ** 17


def test_epsilon_greedy_exploration_schedule_with_minimum():
  # The exploration-rate use: start at 1, multiply by 0.99 each step, never
  # below 0.1.
  schedule = multifactor(
      factors='constant * decay_every', constant=1.0, decay_factor=0.99,
      steps_per_decay=1, minimum=0.1)
  assert float(schedule(0)) == 1.0
  assert float(schedule(1)) == pytest.approx(0.99, rel=1e-6)
  assert float(schedule(10)) == pytest.approx(0.99 ** 10, rel=1e-5)
  assert float(schedule(1000)) == pytest.approx(0.1, rel=1e-7)


def test_minimum_replaces_values_at_or_below_it():
  schedule = multifactor(
      factors='constant * linear_warmup', constant=1.0, warmup_steps=10,
      minimum=0.2)
  assert _values(schedule, [0, 2, 5, 10]) == pytest.approx(
      [0.2, 0.2, 0.5, 1.0], rel=1e-6)


def test_cosine_decay_restarts_every_cycle_after_warmup():
  schedule = multifactor(
      factors='cosine_decay', warmup_steps=10, steps_per_cycle=100)
  expected = {
      0: 1.0,     # before warmup: progress clamped to 0
      10: 1.0,    # start of the first cycle
      35: 0.5 * (1 + math.cos(math.pi * 0.25)),
      60: 0.5,    # half way
      109: 0.5 * (1 + math.cos(math.pi * 0.99)),
      110: 1.0,   # restart
      160: 0.5,
  }
  for step, value in expected.items():
    assert float(schedule(step)) == pytest.approx(value, abs=1e-6), step


def test_whitespace_in_factor_string_is_tolerated():
  tight = multifactor(factors='constant*linear_warmup', warmup_steps=10)
  loose = multifactor(factors='  constant *\tlinear_warmup  ', warmup_steps=10)
  assert _values(tight, [0, 5, 20]) == _values(loose, [0, 5, 20])


def test_returns_float32_scalar_for_python_and_array_steps():
  schedule = multifactor()
  for step in (7, np.int64(7), jnp.int32(7)):
    value = schedule(step)
    assert value.dtype == jnp.float32
    assert value.shape == ()


def test_works_under_jit_with_a_traced_step():
  schedule = multifactor(
      factors='constant * two_constants * linear_warmup * rsqrt_decay * '
              'decay_every * cosine_decay',
      constant=0.5, warmup_steps=10, second_constant_step=20,
      second_constant=0.1, steps_per_decay=15, steps_per_cycle=50,
      minimum=1e-6)
  jitted = jax.jit(schedule)
  for step in (0, 5, 10, 19, 20, 33, 200):
    assert float(jitted(jnp.int32(step))) == pytest.approx(
        float(schedule(step)), rel=1e-6)


def test_unknown_factor_raises_at_construction_naming_it():
  with pytest.raises(ValueError) as excinfo:
    multifactor(factors='constant * linear_warmpu')
  # gin appends an "In call to configurable ..." line when the error passes
  # through the configurable wrapper; our own message is the first line.
  message = str(excinfo.value).splitlines()[0]
  assert "'linear_warmpu'" in message
  for valid in lr_schedules.VALID_FACTORS:
    assert valid in message


def test_gin_binding_changes_the_value():
  gin.parse_config('multifactor.constant = 0.5\n'
                   "multifactor.factors = 'constant'")
  assert float(multifactor()(3)) == 0.5


def test_gin_scopes_give_separate_settings():
  gin.parse_config("""
      multifactor.factors = 'constant'
      policy/multifactor.constant = 0.25
      value/multifactor.constant = 0.75
  """)
  with gin.config_scope('policy'):
    policy_schedule = multifactor()
  with gin.config_scope('value'):
    value_schedule = multifactor()
  assert float(policy_schedule(0)) == 0.25
  assert float(value_schedule(0)) == 0.75
