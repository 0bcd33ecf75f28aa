"""Action distributions parameterised by a policy network's raw outputs.

A policy network ends in a dense layer of width `dist.n_inputs`; its outputs
("dist_inputs", shape `batch_shape + (n_inputs,)`) fully describe the action
distribution at that state. Every method here is a pure jnp function of those
inputs, so the runner can call them inside jitted collection and loss code.

Actions have shape `batch_shape + dist.action_shape` and dtype
`dist.action_dtype`; log-probabilities and entropies have shape `batch_shape`
(summed over the action dimensions, i.e. the action components are treated as
independent).

`temperature` arguments are static Python floats: 0.0 selects the mode, so the
choice between greedy and stochastic code paths is made at trace time.
"""

import functools
import math

import gymnasium as gym
import jax
import jax.numpy as jnp
import numpy as np

from rl.configurables import configurable
from rl.errors import ConfigError

_HALF_LOG_2PI = 0.5 * math.log(2.0 * math.pi)
_HALF_LOG_2PI_E = 0.5 * math.log(2.0 * math.pi * math.e)


def _check_temperature(temperature):
  """Returns True for greedy (mode) sampling; rejects traced/negative values."""
  if isinstance(temperature, jax.core.Tracer):
    # Branching on a traced value would fail deep inside jax with a vague
    # message; point the caller at the fix instead.
    raise TypeError(
        "temperature must be a static Python float (mark it static in jax.jit), "
        f"got a traced value {temperature!r}.")
  temperature = float(temperature)
  if temperature < 0.0:
    raise ValueError(f"temperature must be >= 0, got {temperature}.")
  return temperature == 0.0


def _check_n_inputs(dist_inputs, n_inputs, name):
  if dist_inputs.shape[-1:] != (n_inputs,):
    raise ValueError(
        f"{name} expects dist_inputs with trailing dimension {n_inputs}, "
        f"got shape {dist_inputs.shape}.")


def _sum_trailing(x, n_axes):
  """Sums the last `n_axes` axes (the action dims); a no-op for scalar actions."""
  if n_axes == 0:
    return x
  return jnp.sum(x, axis=tuple(range(-n_axes, 0)))


def inverse_softplus(y):
  """x such that softplus(x) == y, for y > 0 (numerically stable for large y)."""
  y = float(y)
  if y <= 0.0:
    raise ValueError(f"inverse_softplus needs y > 0, got {y}.")
  # log(expm1(y)) overflows for large y; y + log(1 - exp(-y)) is the same value.
  return y + math.log(-math.expm1(-y))


def _jit_method(method):
  """Jits a method with `self` static (distributions hash by configuration).

  Eager callers then pay one compilation per input shape instead of
  op-by-op dispatch; inside an outer jax.jit the inner jit is just inlined.
  """
  return jax.jit(method, static_argnums=0)


class _Distribution:
  """Shared equality/hash so distributions can be jit static args or dict keys."""

  def _config(self):
    raise NotImplementedError

  def __eq__(self, other):
    return type(self) is type(other) and self._config() == other._config()

  def __hash__(self):
    return hash((type(self).__name__, self._config()))

  def __repr__(self):
    args = ", ".join(f"{k}={v!r}" for k, v in self._config())
    return f"{type(self).__name__}({args})"

  def sample(self, dist_inputs, key, temperature=1.0):
    """Actions at `temperature` (a static Python float); 0 gives the mode."""
    if _check_temperature(temperature):
      return self.mode(dist_inputs)
    return self._sample(dist_inputs, key, float(temperature))

  def sample_given(self, dist_inputs, noise, temperature=1.0):
    """`sample` with its randomness drawn already: `noise` is `self.noise(key,
    batch_shape)` for the key `sample` would take, and the actions are the same.

    A rollout draws every step's noise before its step loop (one vectorised
    draw instead of one per step: rl.envs.gymnax_envs.rollout).
    """
    if _check_temperature(temperature):
      return self.mode(dist_inputs)
    return self._sample_given(dist_inputs, noise, float(temperature))

  @functools.partial(jax.jit, static_argnums=(0, 3))
  def _sample(self, dist_inputs, key, temperature):
    noise = self.noise(key, jnp.shape(dist_inputs)[:-1])
    return self._sample_given(dist_inputs, noise, temperature)


class Categorical(_Distribution):
  """Independent categorical components over `n_categories`, logits as inputs."""

  action_dtype = np.dtype(np.int32)

  def __init__(self, n_categories, shape=()):
    n_categories = int(n_categories)
    if n_categories < 1:
      raise ConfigError(f"n_categories must be >= 1, got {n_categories}.")
    self.n_categories = n_categories
    self.shape = tuple(int(s) for s in shape)
    self.action_shape = self.shape
    self.n_inputs = math.prod(self.shape) * n_categories

  def _config(self):
    return (("n_categories", self.n_categories), ("shape", self.shape))

  def _logits(self, dist_inputs):
    dist_inputs = jnp.asarray(dist_inputs)
    _check_n_inputs(dist_inputs, self.n_inputs, "Categorical")
    return dist_inputs.reshape(dist_inputs.shape[:-1] + self.shape + (self.n_categories,))

  @_jit_method
  def mode(self, dist_inputs):
    return jnp.argmax(self._logits(dist_inputs), axis=-1).astype(jnp.int32)

  def noise(self, key, batch_shape):
    """The Gumbel noise of one sample, [*batch_shape, *shape, n_categories]."""
    return jax.random.gumbel(key, tuple(batch_shape) + self.shape + (self.n_categories,),
                             jnp.float32)

  def _sample_given(self, dist_inputs, noise, temperature):
    # The Gumbel-max draw, as jax.random.categorical makes it from the same key.
    logits = self._logits(dist_inputs)
    return jnp.argmax(noise + logits / temperature, axis=-1).astype(jnp.int32)

  @_jit_method
  def log_prob(self, dist_inputs, actions):
    log_p = jax.nn.log_softmax(self._logits(dist_inputs), axis=-1)
    # Buffers may hand actions back as floats; indices must be integers.
    index = jnp.asarray(actions).astype(jnp.int32)[..., None]
    picked = jnp.take_along_axis(log_p, index, axis=-1)[..., 0]
    return _sum_trailing(picked, len(self.shape))

  @_jit_method
  def entropy(self, dist_inputs):
    logits = self._logits(dist_inputs)
    # Normalised log-probabilities: raw logits are only defined up to a constant.
    log_p = jax.nn.log_softmax(logits, axis=-1)
    per_component = -jnp.sum(jnp.exp(log_p) * log_p, axis=-1)
    return _sum_trailing(per_component, len(self.shape))


_LEARN_STD_MODES = (None, "shared", "separate")


@configurable("Gaussian", allowlist=["std", "learn_std"])
class Gaussian(_Distribution):
  """Diagonal Gaussian with the means as the first d inputs (d = prod(shape)).

  Args:
    shape: the action shape (from the action space; not bindable in gin).
    std: the standard deviation, > 0: fixed, or with learn_std the one a
      raw input of 0 gives (a fresh head's).
    learn_std: None keeps `std` fixed; 'shared' reads one extra raw input
      that sets a single std for all dims; 'separate' reads d extra raw
      inputs, one std per dim.
  """

  action_dtype = np.dtype(np.float32)

  def __init__(self, shape=(), std=1.0, learn_std=None):
    if learn_std not in _LEARN_STD_MODES:
      raise ConfigError(
          f"learn_std must be one of {_LEARN_STD_MODES}, got {learn_std!r}.")
    std = float(std)
    if std <= 0.0:
      raise ConfigError(f"Gaussian.std must be > 0, got {std}.")
    self.shape = tuple(int(s) for s in shape)
    self.action_shape = self.shape
    self.std = std
    self.learn_std = learn_std
    self.d = math.prod(self.shape)
    extra = {None: 0, "shared": 1, "separate": self.d}[learn_std]
    self.n_inputs = self.d + extra
    # The offset makes a zero raw output give exactly `std`, so a freshly
    # initialised head (outputs near 0) starts at the configured std.
    self._raw_std_offset = inverse_softplus(std) if learn_std else 0.0

  def _config(self):
    return (("shape", self.shape), ("std", self.std), ("learn_std", self.learn_std))

  def _split(self, dist_inputs):
    """(means, stds), both of shape batch_shape + shape."""
    dist_inputs = jnp.asarray(dist_inputs)
    # Integer inputs (e.g. a test's np.zeros(..., int)) would break the noise draw.
    dist_inputs = dist_inputs.astype(jnp.promote_types(dist_inputs.dtype, jnp.float32))
    _check_n_inputs(dist_inputs, self.n_inputs, "Gaussian")
    batch_shape = dist_inputs.shape[:-1]
    means = dist_inputs[..., :self.d].reshape(batch_shape + self.shape)
    if self.learn_std is None:
      stds = jnp.full_like(means, self.std)
    else:
      raw = dist_inputs[..., self.d:]
      stds = jax.nn.softplus(raw + self._raw_std_offset)
      # 'shared' has a single raw column, broadcast over all d dims.
      stds = jnp.broadcast_to(stds, batch_shape + (self.d,)).reshape(batch_shape + self.shape)
    return means, stds

  def spread_inputs(self, space):
    """dist_inputs of a wide Gaussian over Box `space`, for random initial actions.

    The means sit at the middle of each bounded dimension (0 where a bound is
    infinite). A learned std is set to the std of the uniform distribution
    over [low, high], (high - low) / sqrt(12), where bounded ('shared': the
    mean over the dimensions), and to `std` elsewhere; a fixed std is what it
    is. Actions sampled from these inputs are exactly as likely as the inputs
    say, which uniform draws stored with made-up inputs would not be.
    """
    low = np.broadcast_to(np.asarray(space.low, np.float64), self.shape).reshape(-1)
    high = np.broadcast_to(np.asarray(space.high, np.float64), self.shape).reshape(-1)
    bounded = np.isfinite(low) & np.isfinite(high)
    means = np.where(bounded, (np.where(bounded, low, 0) + np.where(bounded, high, 0)) / 2, 0.0)
    inputs = [means]
    if self.learn_std:
      stds = np.where(bounded, (np.where(bounded, high - low, 0)) / math.sqrt(12.0), self.std)
      stds = np.maximum(stds, 1e-6)
      if self.learn_std == "shared":
        stds = stds.mean(keepdims=True)
      inputs.append([inverse_softplus(s) - self._raw_std_offset for s in stds])
    return np.concatenate(inputs).astype(np.float32)

  @_jit_method
  def mode(self, dist_inputs):
    return self._split(dist_inputs)[0].astype(jnp.float32)

  def noise(self, key, batch_shape):
    """The standard normal noise of one sample, [*batch_shape, *shape]."""
    return jax.random.normal(key, tuple(batch_shape) + self.shape, jnp.float32)

  def _sample_given(self, dist_inputs, noise, temperature):
    means, stds = self._split(dist_inputs)
    return (means + temperature * stds * noise).astype(jnp.float32)

  @_jit_method
  def log_prob(self, dist_inputs, actions):
    means, stds = self._split(dist_inputs)
    z = (jnp.asarray(actions) - means) / stds
    per_dim = -0.5 * jnp.square(z) - jnp.log(stds) - _HALF_LOG_2PI
    return _sum_trailing(per_dim, len(self.shape))

  @_jit_method
  def entropy(self, dist_inputs):
    _, stds = self._split(dist_inputs)
    return _sum_trailing(jnp.log(stds) + _HALF_LOG_2PI_E, len(self.shape))


def normal_and_uniform(key, shape):
  """(standard normal, uniform [0, 1)) noise of `shape`: the randomness of one draw of a policy
  that acts uniformly over its box before learning starts (TanhGaussian, TD3's)."""
  normal_key, uniform_key = jax.random.split(key)
  return (jax.random.normal(normal_key, shape, jnp.float32),
          jax.random.uniform(uniform_key, shape, jnp.float32))


class TanhGaussian(_Distribution):
  """A diagonal Gaussian squashed by tanh into the box [low, high]: SAC's policy.

  An action is a = mid + half * tanh(u), u ~ N(mean, std), with mid and half
  the box's centre and half-width; the mode is mid + half * tanh(mean). The
  inputs are the d means, then d raw log-stds mapped smoothly into
  [log_std_min, log_std_max] (CleanRL's bound, which keeps a gradient where a
  clip would not). The one sampling argument, `uniform` (0 or 1, traced),
  replaces the policy's actions with uniform draws over the box: the random
  actions before learning starts.
  """

  action_dtype = np.dtype(np.float32)

  def __init__(self, shape, low, high, log_std_min=-5.0, log_std_max=2.0):
    self.shape = tuple(int(s) for s in shape)
    self.action_shape = self.shape
    self.d = math.prod(self.shape)
    self.n_inputs = 2 * self.d
    self.low = tuple(float(x) for x in np.broadcast_to(low, self.shape).reshape(-1))
    self.high = tuple(float(x) for x in np.broadcast_to(high, self.shape).reshape(-1))
    if not all(math.isfinite(x) for x in self.low + self.high):
      raise ConfigError(f"a tanh-squashed policy needs a bounded action box, got low "
                        f"{self.low} and high {self.high}.")
    self.log_std_range = (float(log_std_min), float(log_std_max))

  def _config(self):
    return (("shape", self.shape), ("low", self.low), ("high", self.high),
            ("log_std_range", self.log_std_range))

  def _box(self):
    """(centre, half-width) of the box, shaped as an action."""
    low, high = (np.asarray(b, np.float32).reshape(self.shape) for b in (self.low, self.high))
    return (low + high) / 2, (high - low) / 2

  def _split(self, dist_inputs):
    """(means, log-stds), both batch_shape + shape."""
    dist_inputs = jnp.asarray(dist_inputs, jnp.float32)
    _check_n_inputs(dist_inputs, self.n_inputs, "TanhGaussian")
    batch_shape = dist_inputs.shape[:-1]
    means = dist_inputs[..., :self.d].reshape(batch_shape + self.shape)
    lowest, highest = self.log_std_range
    raw = dist_inputs[..., self.d:].reshape(batch_shape + self.shape)
    return means, lowest + (highest - lowest) * (jnp.tanh(raw) + 1) / 2

  def mode(self, dist_inputs):
    centre, half = self._box()
    return centre + half * jnp.tanh(self._split(dist_inputs)[0])

  def noise(self, key, batch_shape):
    return normal_and_uniform(key, tuple(batch_shape) + self.shape)

  def sample(self, dist_inputs, key, temperature=1.0, uniform=0.0):
    """Actions at `temperature` (0: the mode); uniform over the box where `uniform` is 1."""
    noise = None if _check_temperature(temperature) else self.noise(
        key, jnp.shape(dist_inputs)[:-1])
    return self.sample_given(dist_inputs, noise, temperature, uniform)

  def sample_given(self, dist_inputs, noise, temperature=1.0, uniform=0.0):
    """`sample` with `noise` = self.noise(key, batch_shape) drawn already: the same actions."""
    if _check_temperature(temperature):
      return self.mode(dist_inputs)
    normal, uniform_noise = noise
    means, log_stds = self._split(dist_inputs)
    centre, half = self._box()
    actions = centre + half * jnp.tanh(means + temperature * jnp.exp(log_stds) * normal)
    return jnp.where(uniform > 0, centre + half * (2 * uniform_noise - 1), actions)

  def sample_with_log_prob(self, dist_inputs, normal):
    """(actions, log pi(actions)) of the reparameterised draw u = mean + std * `normal`.

    The log-density of a = mid + half * tanh(u) is that of u less
    log(half * (1 - tanh(u)^2)) per dimension, written with
    log(1 - tanh(u)^2) = 2 (log 2 - u - softplus(-2u)), which stays finite
    where tanh(u) rounds to +-1.
    """
    means, log_stds = self._split(dist_inputs)
    u = means + jnp.exp(log_stds) * normal
    centre, half = self._box()
    log_gaussian = -0.5 * jnp.square(normal) - log_stds - _HALF_LOG_2PI
    log_det = jnp.log(half) + 2 * (math.log(2.0) - u - jax.nn.softplus(-2 * u))
    return centre + half * jnp.tanh(u), _sum_trailing(log_gaussian - log_det, len(self.shape))


_SUPPORTED_SPACES = "Discrete, MultiDiscrete (with equal nvec) and Box"


def _reject(space, why):
  return TypeError(
      f"Cannot create an action distribution for {space!r}: {why}. "
      f"Supported action spaces: {_SUPPORTED_SPACES}.")


def create_distribution(space):
  """The action distribution matching a gymnasium action space."""
  if isinstance(space, gym.spaces.Discrete):
    if int(space.start) != 0:
      # Sampled actions are 0..n-1; silently shifting them would hide bugs.
      raise _reject(space, "only start=0 is supported")
    return Categorical(int(space.n))
  if isinstance(space, gym.spaces.MultiDiscrete):
    nvec = np.asarray(space.nvec)
    if nvec.size == 0 or np.any(nvec != nvec.flat[0]):
      raise _reject(space, "all entries of nvec must be equal")
    if np.any(np.asarray(space.start) != 0):
      raise _reject(space, "only start=0 is supported")
    return Categorical(int(nvec.flat[0]), shape=nvec.shape)
  if isinstance(space, gym.spaces.Box):
    return Gaussian(shape=space.shape)
  raise _reject(space, f"{type(space).__name__} spaces are not supported")
