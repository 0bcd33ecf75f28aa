"""Tests for rl.ops.distributions against hand-computed numbers."""

import math

import gin
import gymnasium as gym
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from rl.ops import distributions
from rl.ops.distributions import Categorical, Gaussian, create_distribution

HALF_LOG_2PI_E = 0.5 * math.log(2.0 * math.pi * math.e)  # 1.418939

# Logits log(1), log(2), log(3) give probabilities 1/6, 2/6, 3/6.
LOGITS_123 = np.log(np.array([1.0, 2.0, 3.0], dtype=np.float32))


# ---------------------------------------------------------------- Categorical


def test_categorical_log_prob_by_hand():
  dist = Categorical(3)
  # p = [1/6, 1/3, 1/2]: log p(2) = log(1/2) = -0.693147, log p(0) = -log 6 = -1.791759.
  logits = np.stack([LOGITS_123, LOGITS_123])
  np.testing.assert_allclose(dist.log_prob(logits, np.array([2, 0])),
                             [-0.693147, -1.791759], atol=1e-5)
  # Adding a constant to all logits must not change anything (normalisation).
  np.testing.assert_allclose(dist.log_prob(logits + 5.0, np.array([2, 0])),
                             [-0.693147, -1.791759], atol=1e-5)


def test_categorical_entropy_by_hand():
  dist = Categorical(3)
  # H = 1/6 ln 6 + 1/3 ln 3 + 1/2 ln 2 = 0.298627 + 0.366204 + 0.346574 = 1.011404
  np.testing.assert_allclose(dist.entropy(LOGITS_123), 1.011404, atol=1e-5)
  np.testing.assert_allclose(dist.entropy(LOGITS_123 + 7.0), 1.011404, atol=1e-5)
  # Two equal logits: H = ln 2 = 0.693147.
  np.testing.assert_allclose(Categorical(2).entropy(np.zeros(2)), 0.693147, atol=1e-6)


def test_categorical_temperature_zero_is_argmax():
  dist = Categorical(4)
  logits = np.array([[0.1, 3.0, -1.0, 2.9], [5.0, 0.0, 0.0, 0.0]], dtype=np.float32)
  actions = dist.sample(logits, jax.random.PRNGKey(0), 0.0)
  assert actions.dtype == jnp.int32
  np.testing.assert_array_equal(actions, [1, 0])
  np.testing.assert_array_equal(dist.mode(logits), [1, 0])


@pytest.mark.parametrize("temperature, expected", [
    # softmax(log [1,2,3]) = [1/6, 2/6, 3/6] = [0.1667, 0.3333, 0.5]
    (1.0, [1 / 6, 2 / 6, 3 / 6]),
    # softmax(log [1,2,3] / 2) ∝ sqrt([1,2,3]) = [1, 1.4142, 1.7321] / 4.1463
    #   = [0.2412, 0.3411, 0.4177]
    (2.0, [0.2412, 0.3411, 0.4177]),
])
def test_categorical_sampling_frequencies(temperature, expected):
  dist = Categorical(3)
  n = 20_000
  logits = np.broadcast_to(LOGITS_123, (n, 3))
  actions = np.asarray(dist.sample(logits, jax.random.PRNGKey(1), temperature))
  frequencies = np.bincount(actions, minlength=3) / n
  # Std of a frequency estimate is at most sqrt(0.25 / 20000) = 0.0035.
  np.testing.assert_allclose(frequencies, expected, atol=0.015)


def test_categorical_multi_discrete_shapes_and_sums():
  dist = Categorical(3, shape=(2,))
  assert dist.n_inputs == 6
  assert dist.action_shape == (2,)
  assert dist.action_dtype == np.int32
  inputs = np.tile(np.concatenate([LOGITS_123, np.zeros(3, np.float32)]), (4, 1))
  actions = dist.sample(inputs, jax.random.PRNGKey(2), 1.0)
  assert actions.shape == (4, 2)
  assert dist.mode(inputs).shape == (4, 2)
  # Component 0: log p(2) = log(1/2); component 1 (uniform): log(1/3).
  # Sum = -0.693147 - 1.098612 = -1.791759.
  log_p = dist.log_prob(inputs, np.tile([2, 1], (4, 1)))
  assert log_p.shape == (4,)
  np.testing.assert_allclose(log_p, -1.791759, atol=1e-5)
  # Entropies add up: 1.011404 + ln 3 (1.098612) = 2.110016.
  np.testing.assert_allclose(dist.entropy(inputs), 2.110016, atol=1e-5)


def test_categorical_rejects_wrong_input_width():
  with pytest.raises(ValueError, match="trailing dimension 6"):
    Categorical(3, shape=(2,)).log_prob(np.zeros((2, 3)), np.zeros((2, 2)))


# ------------------------------------------------------------------- Gaussian


def test_gaussian_log_prob_and_entropy_by_hand():
  dist = Gaussian(shape=(2,), std=0.5)
  assert dist.n_inputs == 2
  means = np.array([[0.0, 1.0]], dtype=np.float32)
  actions = np.array([[0.5, 1.0]], dtype=np.float32)
  # z = (a - mu) / sigma = [1, 0].
  # log p = -0.5 (1 + 0) - 2 ln 0.5 - 2 * 0.918939
  #       = -0.5 + 1.386294 - 1.837877 = -0.951583
  np.testing.assert_allclose(dist.log_prob(means, actions), [-0.951583], atol=1e-5)
  # H = 2 (ln 0.5 + 1.418939) = 2 (-0.693147 + 1.418939) = 1.451584
  np.testing.assert_allclose(dist.entropy(means), [1.451584], atol=1e-5)


def test_gaussian_entropy_is_log_sigma_not_exp():
  # With sigma = 1 the reference's exp bug would give 1 + 1.418939; correct is 1.418939.
  dist = Gaussian(shape=(), std=1.0)
  np.testing.assert_allclose(dist.entropy(np.zeros((3, 1))), [HALF_LOG_2PI_E] * 3, atol=1e-6)


@pytest.mark.parametrize("learn_std, n_inputs", [(None, 3), ("shared", 4), ("separate", 6)])
def test_gaussian_n_inputs_and_zero_raw_gives_std(learn_std, n_inputs):
  dist = Gaussian(shape=(3,), std=0.7, learn_std=learn_std)
  assert dist.n_inputs == n_inputs
  assert dist.action_shape == (3,)
  assert dist.action_dtype == np.float32
  inputs = np.zeros((5, n_inputs), dtype=np.float32)
  # All-zero raw std outputs mean sigma = 0.7 on each of 3 dims:
  # H = 3 (ln 0.7 + 1.418939) = 3 (-0.356675 + 1.418939) = 3.186792
  np.testing.assert_allclose(dist.entropy(inputs), [3.186792] * 5, atol=1e-5)
  assert dist.log_prob(inputs, np.zeros((5, 3))).shape == (5,)


def test_gaussian_learned_std_nonzero_raw():
  dist = Gaussian(shape=(2,), std=1.0, learn_std="separate")
  inputs = np.array([[0.0, 0.0, 1.0, -1.0]], dtype=np.float32)
  # sigma = softplus(raw + ln(e - 1)) = ln(1 + e^raw (e - 1)):
  #   raw = 1:  ln(1 + e^2 - e) = ln 5.670774 = 1.735326
  #   raw = -1: ln(1 + 1 - 1/e) = ln 1.632121 = 0.489880
  # H = ln 1.735326 + ln 0.489880 + 2 * 1.418939 = 0.551190 - 0.713594 + 2.837877 = 2.675473
  np.testing.assert_allclose(dist.entropy(inputs), [2.675473], atol=1e-5)
  shared = Gaussian(shape=(2,), std=1.0, learn_std="shared")
  # One shared raw output of 1 gives sigma = 1.735326 on both dims:
  # H = 2 (0.551190 + 1.418939) = 3.940258
  np.testing.assert_allclose(shared.entropy(np.array([[0.0, 0.0, 1.0]])), [3.940258], atol=1e-5)


def test_gaussian_temperature():
  dist = Gaussian(shape=(), std=2.0)
  means = np.full((20_000, 1), 3.0, dtype=np.float32)
  np.testing.assert_array_equal(dist.sample(means, jax.random.PRNGKey(0), 0.0), means[:, 0])
  samples = np.asarray(dist.sample(means, jax.random.PRNGKey(0), 0.5))
  assert samples.shape == (20_000,)
  assert samples.dtype == np.float32
  # Temperature scales the std: 0.5 * 2.0 = 1.0. Std error of the mean is 0.007.
  np.testing.assert_allclose(samples.mean(), 3.0, atol=0.05)
  np.testing.assert_allclose(samples.std(), 1.0, atol=0.05)


@pytest.mark.parametrize("learn_std", [None, "separate"])
def test_gaussian_density_integrates_to_one(learn_std):
  dist = Gaussian(shape=(), std=1.5, learn_std=learn_std)
  grid = np.linspace(-15.0, 15.0, 6001, dtype=np.float32)
  inputs = np.zeros((grid.size, dist.n_inputs), dtype=np.float32)
  inputs[:, 0] = 0.3
  density = np.exp(np.asarray(dist.log_prob(inputs, grid)))
  integral = density.sum() * (grid[1] - grid[0])
  np.testing.assert_allclose(integral, 1.0, atol=0.05)


def test_gaussian_rejects_bad_learn_std():
  with pytest.raises(ValueError, match="learn_std"):
    Gaussian(learn_std="diagonal")


def test_sampling_under_jit():
  # Temperature is static, so callers close over it (or mark it static).
  logits = np.stack([LOGITS_123] * 4)
  sample = jax.jit(lambda x, k: Categorical(3).sample(x, k, 1.0))
  assert sample(logits, jax.random.PRNGKey(0)).shape == (4,)
  gauss = Gaussian(shape=(2,), learn_std="shared")
  out = jax.jit(lambda x, k: gauss.sample(x, k, 1.0))(np.zeros((4, 3)), jax.random.PRNGKey(0))
  assert out.shape == (4, 2)


def test_traced_temperature_gives_clear_error():
  dist = Categorical(3)
  with pytest.raises(TypeError, match="static Python float"):
    jax.jit(dist.sample)(LOGITS_123, jax.random.PRNGKey(0), 1.0)


def test_distributions_compare_by_value():
  assert Categorical(3, shape=(2,)) == Categorical(3, shape=[2])
  assert hash(Gaussian(std=0.5)) == hash(Gaussian(std=0.5))
  assert Gaussian(std=0.5) != Gaussian(std=0.6)


# -------------------------------------------------------- create_distribution


def test_create_distribution_discrete():
  dist = create_distribution(gym.spaces.Discrete(4))
  assert dist == Categorical(4)
  assert dist.n_inputs == 4 and dist.action_shape == () and dist.action_dtype == np.int32


def test_create_distribution_multi_discrete():
  dist = create_distribution(gym.spaces.MultiDiscrete([3, 3, 3]))
  assert dist == Categorical(3, shape=(3,))
  assert dist.n_inputs == 9
  with pytest.raises(TypeError, match="equal"):
    create_distribution(gym.spaces.MultiDiscrete([2, 3]))


def test_create_distribution_box():
  dist = create_distribution(gym.spaces.Box(-1.0, 1.0, shape=(2,)))
  assert dist == Gaussian(shape=(2,))
  assert dist.n_inputs == 2 and dist.action_shape == (2,) and dist.action_dtype == np.float32


def test_create_distribution_box_uses_gin_defaults():
  try:
    gin.parse_config(["Gaussian.std = 0.5", "Gaussian.learn_std = 'shared'"])
    dist = create_distribution(gym.spaces.Box(-1.0, 1.0, shape=(3,)))
  finally:
    gin.clear_config()
  assert dist.std == 0.5 and dist.learn_std == "shared" and dist.n_inputs == 4


@pytest.mark.parametrize("space", [
    gym.spaces.Text(5),
    gym.spaces.Dict({"a": gym.spaces.Discrete(2)}),
    gym.spaces.Discrete(3, start=1),
])
def test_create_distribution_rejects_unsupported(space):
  with pytest.raises(TypeError, match="Supported action spaces") as err:
    create_distribution(space)
  assert type(space).__name__ in str(err.value)


def test_inverse_softplus_round_trips():
  for y in (1e-3, 0.5, 1.0, 50.0):
    x = distributions.inverse_softplus(y)
    np.testing.assert_allclose(float(jax.nn.softplus(jnp.float32(x))), y, rtol=1e-5)
