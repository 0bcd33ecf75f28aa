"""Networks for RL agents: MLP and CNN bodies, running observation
normalisation, and the policy / value / policy-and-value / Q-value models
built from them.

Shapes. Every model consumes observations shaped [B, L, *obs_shape] (batch of
slices of L timesteps) and returns per-timestep outputs shaped [B, L, ...].

Gin. The linen Module classes below are plain dataclasses; gin is only put on
the *factory functions* (`MLP`, `AtariCnnBody`, `MinAtarCnnBody`, `Normalize`,
`Policy`, `Value`, `PolicyAndValue`, `Quality`). Gin rewriting a dataclass'
__init__ interferes with linen's own dataclass transform and module cloning,
whereas a factory is an ordinary function gin handles well. `body` / `normalizer` arguments are
factories too (gin passes `@MLP`, `@AtariCnnBody`, `@Normalize`), so every
call builds a fresh, unbound module.

Images. The CNN bodies take observations as the env stores them, uint8
frames included, and scale them to floats themselves (see `CnnModule`), so
buffers stay uint8 and no normaliser is needed. A CNN body on vector
observations stops at initialisation with a ConfigError naming the MLP body.

Variables. `init_variables(model, key, obs)` returns {'params': ...} plus a
'normalizer' collection when the model has a normaliser. Collection code runs
`model.apply(variables, obs, update_normalizer=True, mutable=['normalizer'])`;
training code runs `model.apply(variables, obs)`. `update_normalizer` is a
Python bool: close over it (or mark it static) when jitting.

Weight sharing (`n_shared_layers` of the actor-critic agents) counts
*top-level layers* the way the reference does for Serial(normalizer, body,
head): see `top_level_layers` and `copy_shared_layers`.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import flax.linen as nn
import gin
import jax
import jax.numpy as jnp

from rl.errors import ConfigError

__all__ = [
    'MLP',
    'MLPModule',
    'AtariCnnBody',
    'MinAtarCnnBody',
    'CnnModule',
    'Normalize',
    'NormalizeModule',
    'Policy',
    'PolicyModel',
    'Value',
    'ValueModel',
    'ActionInjector',
    'PolicyAndValue',
    'PolicyAndValueModel',
    'Quality',
    'QualityModel',
    'top_level_layers',
    'copy_shared_layers',
    'init_variables',
    'NORMALIZER_COLLECTION',
]

# The variable collection (and the submodule name) that holds running
# observation statistics. They are state, not parameters: optimisers must not
# touch them, so they live outside 'params'.
NORMALIZER_COLLECTION = 'normalizer'
_NORMALIZER_NAME = 'normalizer'


# ---------------------------------------------------------------------------
# Activations and initialisers
# ---------------------------------------------------------------------------

_ACTIVATIONS: dict[str, Callable[[jax.Array], jax.Array]] = {
    'relu': nn.relu,
    'tanh': nn.tanh,
    'gelu': nn.gelu,
    'elu': nn.elu,
    'swish': nn.swish,
    'silu': nn.silu,
    'sigmoid': nn.sigmoid,
    'identity': lambda x: x,
    'linear': lambda x: x,
}


def _by_name(value: str | Callable, table: dict, parameter: str) -> Callable:
  """`value` if it is callable, else its entry in `table` (case-insensitive).

  Raises ConfigError naming `parameter` and the accepted names otherwise.
  """
  if callable(value):
    return value
  if isinstance(value, str) and value.lower() in table:
    return table[value.lower()]
  raise ConfigError(f'Unknown {parameter} {value!r}; use a callable or one of {sorted(table)}.')


def _resolve_activation(activation: str | Callable) -> Callable:
  return _by_name(activation, _ACTIVATIONS, 'activation_fn')


# Hidden layers: orthogonal with gain sqrt(2), zero bias. This is the init
# CleanRL and SB3 use for on-policy agents (following "What matters in
# on-policy RL", Andrychowicz et al. 2021): orthogonal matrices preserve the
# norm of activations through depth, and sqrt(2) compensates for ReLU
# discarding half of the signal, so early gradients are well scaled without
# any warm-up. Zero bias keeps the initial function centred.
_HIDDEN_KERNEL_INIT = nn.initializers.orthogonal(scale=math.sqrt(2.0))

# Default head gains. A policy head with tiny weights emits near-equal logits
# (or near-zero Gaussian means), i.e. a near-uniform initial policy that
# explores evenly and does not commit to an action before any learning
# signal. Value/Q heads use gain 1 so predictions start at the scale of the
# features and can follow the targets' scale quickly.
_POLICY_HEAD_GAIN = 0.01
_VALUE_HEAD_GAIN = 1.0


def _symmetric_uniform(limit: float) -> Callable:
  """Initialiser drawing from U(-limit, limit) (flax's `uniform` is [0, s))."""

  def init(key, shape, dtype=jnp.float32):
    return jax.random.uniform(key, shape, dtype, minval=-limit, maxval=limit)

  return init


def _head_kernel_init(head_init_range: float | None, default_gain: float) -> Callable:
  if head_init_range is not None:
    if head_init_range <= 0:
      raise ConfigError(f'head_init_range must be positive, got {head_init_range}.')
    return _symmetric_uniform(float(head_init_range))
  return nn.initializers.orthogonal(scale=default_gain)


def _head(features: int, head_init_range: float | None, default_gain: float,
          name: str | None = None) -> nn.Dense:
  return nn.Dense(
      features,
      kernel_init=_head_kernel_init(head_init_range, default_gain),
      bias_init=nn.initializers.zeros,
      name=name,
  )


# ---------------------------------------------------------------------------
# MLP body
# ---------------------------------------------------------------------------


class MLPModule(nn.Module):
  """Dense + activation per width; [B, L, *obs_shape] -> [B, L, features].

  With `flatten`, the trailing observation dims are flattened first (a
  scalar observation [B, L] becomes [B, L, 1]); without it, Dense layers act
  on the last axis only. With no widths the module is (flatten and) identity.
  """

  layer_widths: Sequence[int] = (64, 64)
  activation_fn: str | Callable = 'relu'
  out_activation: bool = True
  flatten: bool = True

  @nn.compact
  def __call__(self, x: jax.Array) -> jax.Array:
    activation = _resolve_activation(self.activation_fn)
    if self.flatten:
      if x.ndim < 2:
        raise ValueError(
            f'MLP expects inputs [B, L, *obs_shape]; got shape {x.shape}.')
      x = jnp.reshape(x, x.shape[:2] + (-1,))
    n = len(self.layer_widths)
    for i, width in enumerate(self.layer_widths):
      x = nn.Dense(int(width), kernel_init=_HIDDEN_KERNEL_INIT,
                   bias_init=nn.initializers.zeros, name=f'dense_{i}')(x)
      if i < n - 1 or self.out_activation:
        x = activation(x)
    return x


@gin.configurable
def MLP(layer_widths: Sequence[int] = (64, 64),
        activation_fn: str | Callable = 'relu',
        out_activation: bool = True,
        flatten: bool = True) -> MLPModule:
  """Builds an MLP body (see `MLPModule`)."""
  # Tuples keep the module hashable/comparable (gin may hand over lists).
  return MLPModule(layer_widths=tuple(int(w) for w in layer_widths),
                   activation_fn=activation_fn,
                   out_activation=out_activation,
                   flatten=flatten)


# ---------------------------------------------------------------------------
# CNN bodies (pixel frames and small grids)
# ---------------------------------------------------------------------------

# Kernel initialisers the CNN bodies accept by name (gin binds strings more
# easily than initialiser objects).
_CNN_KERNEL_INITS: dict[str, Callable] = {
    # The MLP body's init (see _HIDDEN_KERNEL_INIT); CleanRL's Atari PPO uses
    # it for its conv layers too.
    'orthogonal': _HIDDEN_KERNEL_INIT,
    # U(-1/sqrt(fan_in), 1/sqrt(fan_in)), fan_in = kernel height * width *
    # input channels: the reference's Atari conv init. A uniform variance
    # scaling with scale 1/3 has exactly that bound, sqrt(3 * scale / fan_in).
    'atari_conv': nn.initializers.variance_scaling(1.0 / 3.0, 'fan_in', 'uniform'),
    'glorot_uniform': nn.initializers.glorot_uniform(),
    'lecun_normal': nn.initializers.lecun_normal(),
}

_CNN_PADDINGS = ('VALID', 'SAME')


def _resolve_kernel_init(kernel_initializer: str | Callable, config_name: str) -> Callable:
  return _by_name(kernel_initializer, _CNN_KERNEL_INITS, f'{config_name}.kernel_initializer')


def _image_layout(obs_shape: tuple[int, ...], n_frames: int,
                  config_name: str) -> tuple[bool, tuple[int, int, int]]:
  """How a CNN body reads one observation: (frames_first, (H, W, channels)).

  See `CnnModule` for the accepted layouts. Raises ConfigError for
  observations that are not images, or whose frames do not match n_frames.
  """
  if len(obs_shape) < 2:
    raise ConfigError(
        f'{config_name} needs image observations (H, W), (H, W, C) or stacked '
        f'frames, but this env\'s observations have shape {obs_shape}; use an MLP '
        f'body for vector observations (bind the network\'s body to @MLP).')
  if len(obs_shape) > 4:
    raise ConfigError(
        f'{config_name} reads observations of rank 2 to 4 (H, W[, C] or frames '
        f'first), but this env\'s observations have shape {obs_shape}; reshape them '
        'with a gymnasium wrapper.')
  wrong_frames = (
      f'{config_name}.n_frames is {n_frames}, but observations of shape {obs_shape} '
      'do not hold that many stacked frames (first axis, or the channels of the last); '
      f'set {config_name}.n_frames to the number of stacked frames (1 if none).')
  if len(obs_shape) == 2:  # one frame without a channel axis
    if n_frames != 1:
      raise ConfigError(wrong_frames)
    return False, (obs_shape[0], obs_shape[1], 1)
  if len(obs_shape) == 4:  # (F, H, W, C): stacked frames with channels
    if obs_shape[0] != n_frames:
      raise ConfigError(wrong_frames)
    f, h, w, c = obs_shape
    return True, (h, w, f * c)
  # Rank 3 is (F, H, W) or (H, W, C). Frames come first only when the first
  # axis matches n_frames and the last does not, so an image whose channels
  # happen to equal n_frames (84x84x4) still reads as channels last.
  if obs_shape[0] == n_frames and obs_shape[-1] != n_frames:
    f, h, w = obs_shape
    return True, (h, w, f)
  if obs_shape[-1] % n_frames:
    raise ConfigError(wrong_frames)
  return False, tuple(obs_shape)


def _conv_output_size(size: int, kernel: int, stride: int, padding: str) -> int:
  if padding == 'SAME':
    return -(-size // stride)
  return (size - kernel) // stride + 1 if size >= kernel else 0


class CnnModule(nn.Module):
  """Conv layers + Dense on images: [B, L, *obs_shape] -> [B, L, output_size].

  Each conv layer i has hidden_sizes[i] filters of kernel_sizes[i] squared
  with stride strides[i], then ReLU; the result is flattened and goes
  through Dense(output_size) and ReLU. Build it with `AtariCnnBody` or
  `MinAtarCnnBody`.

  Observation layouts (one observation, after the [B, L] axes):
    (H, W)            one frame without a channel axis; n_frames must be 1.
    (n_frames, H, W)  frames stacked first: gymnasium's FrameStackObservation
                      on grayscale frames (AtariPreprocessing) gives (4, 84, 84).
    (n_frames, H, W, C)  the same for frames with channels (e.g. RGB).
    (H, W, C)         channels last, C a multiple of n_frames: frames stacked
                      on the channel axis (84, 84, 4), or a MinAtar grid
                      (10, 10, channels) with n_frames 1.
  Stacked-first frames are moved onto the channel axis (channel f * C + c),
  so both stacking layouts give the same network. A rank-3 observation is
  read as frames first only if its first axis is n_frames and its last is
  not. The move is done on the input's own dtype, before the float cast, so
  it moves a quarter of the bytes for uint8 frames.

  Input scaling happens here, so observations can be stored and fed as
  uint8: uint8 inputs are cast to float32 and multiplied by `uint8_scale`
  (1/255 maps pixels to [0, 1]); bool and float inputs are only cast, float
  ones keep their values. A `Normalize` layer in front is therefore not
  needed for images (and it hands the body floats, which skip the uint8
  scaling; see NormalizeModule).

  `config_name` is the gin name of the factory that built the module; the
  errors for observations the body cannot read name its bindings.
  """

  hidden_sizes: Sequence[int] = (32, 64, 64)
  kernel_sizes: Sequence[int] = (8, 4, 3)
  strides: Sequence[int] = (4, 2, 1)
  output_size: int = 512
  padding: str = 'VALID'
  n_frames: int = 4
  uint8_scale: float = 1.0 / 255.0
  kernel_initializer: str | Callable = 'orthogonal'
  config_name: str = 'AtariCnnBody'

  @nn.compact
  def __call__(self, x: jax.Array) -> jax.Array:
    if x.ndim < 2:
      raise ValueError(
          f'{self.config_name} expects inputs [B, L, *obs_shape]; got shape {x.shape}.')
    batch_shape, obs_shape = x.shape[:2], tuple(x.shape[2:])
    frames_first, image_shape = _image_layout(obs_shape, self.n_frames, self.config_name)
    self._check_image_size(obs_shape, image_shape)
    x = jnp.reshape(x, (-1,) + obs_shape)
    if frames_first:
      if len(obs_shape) == 3:
        x = x[..., None]  # (F, H, W) -> (F, H, W, 1)
      x = jnp.moveaxis(x, 1, 3)  # (N, F, H, W, C) -> (N, H, W, F, C)
    x = jnp.reshape(x, (-1,) + image_shape)
    if x.dtype == jnp.uint8:
      x = x.astype(jnp.float32) * jnp.float32(self.uint8_scale)
    else:
      x = x.astype(jnp.float32)

    kernel_init = _resolve_kernel_init(self.kernel_initializer, self.config_name)
    for i, (features, kernel, stride) in enumerate(
        zip(self.hidden_sizes, self.kernel_sizes, self.strides)):
      x = nn.Conv(int(features), (int(kernel), int(kernel)), (int(stride), int(stride)),
                  padding=self.padding, kernel_init=kernel_init,
                  bias_init=nn.initializers.zeros, name=f'conv_{i}')(x)
      x = nn.relu(x)
    x = jnp.reshape(x, (x.shape[0], -1))
    x = nn.Dense(int(self.output_size), kernel_init=kernel_init,
                 bias_init=nn.initializers.zeros, name='dense')(x)
    x = nn.relu(x)
    return jnp.reshape(x, batch_shape + (int(self.output_size),))

  def _check_image_size(self, obs_shape, image_shape):
    """One line naming the fix when an image is smaller than the conv stack needs.

    Without it, lax.conv fails on a negative output size with a message about
    dimension numbers, far from the binding to change.
    """
    h, w = image_shape[:2]
    for kernel, stride in zip(self.kernel_sizes, self.strides):
      h = _conv_output_size(h, int(kernel), int(stride), self.padding)
      w = _conv_output_size(w, int(kernel), int(stride), self.padding)
    if h < 1 or w < 1:
      # Small grids (MinAtar's 10x10) are the likely case for the Nature stack.
      small_body = ' or MinAtarCnnBody' if self.config_name == 'AtariCnnBody' else ''
      raise ConfigError(
          f'{self.config_name} reads observations of shape {obs_shape} as images '
          f'{image_shape} (H, W, channels), too small for its {self.padding} convolutions '
          f'(kernels {tuple(self.kernel_sizes)}, strides {tuple(self.strides)}); if '
          f'frames are stacked first, set {self.config_name}.n_frames to their number, '
          f"else use {self.config_name}.padding = 'SAME'{small_body}.")


def _cnn_padding(padding: str, config_name: str) -> str:
  if isinstance(padding, str) and padding.upper() in _CNN_PADDINGS:
    return padding.upper()
  raise ConfigError(
      f"{config_name}.padding must be 'VALID' or 'SAME', got {padding!r}.")


def _positive_ints(values: Sequence[int], what: str) -> tuple[int, ...]:
  try:
    ints = tuple(int(v) for v in values)
  except (TypeError, ValueError):
    ints = ()
  if not ints or min(ints) < 1:
    raise ConfigError(f'{what} must be a sequence of positive integers, got {values!r}.')
  return ints


def _positive_int(value: int, what: str) -> int:
  try:
    number = int(value)
  except (TypeError, ValueError):
    number = 0
  if number < 1 or number != value:
    raise ConfigError(f'{what} must be a positive integer, got {value!r}.')
  return number


@gin.configurable
def AtariCnnBody(n_frames: int = 4,
                 hidden_sizes: Sequence[int] = (32, 64, 64),
                 output_size: int = 512,
                 kernel_initializer: str | Callable = 'orthogonal',
                 padding: str = 'VALID',
                 uint8_scale: float = 1.0 / 255.0) -> CnnModule:
  """Builds the Nature-DQN conv body for Atari frames (see `CnnModule`).

  Conv 8x8 stride 4, 4x4 stride 2, 3x3 stride 1 (ReLU after each), flatten,
  Dense(output_size) + ReLU. On 84x84 frames with 'VALID' padding the maps
  are 20x20, 9x9 and 7x7, so the Dense layer reads 7 * 7 * 64 = 3136 features.
  Its parameters live under the model's 'body' as conv_0..conv_2 and dense.

  Frames are stacked by the env (gymnasium's FrameStackObservation), not by
  the body: acting feeds the network one timestep (L = 1), so a body that
  stacked consecutive timesteps of a slice, as the reference's did, would see
  no history when it acts.

  Args:
    n_frames: stacked frames per observation (4 for the usual Atari
      preprocessing); tells the body where the stack is, see `CnnModule`.
    hidden_sizes: filters of the three conv layers.
    output_size: width of the final Dense layer.
    kernel_initializer: init of every conv and Dense kernel: 'orthogonal'
      (gain sqrt(2), as the MLP body), 'atari_conv' (uniform in
      +-1/sqrt(fan_in), the reference's Atari configs), 'glorot_uniform',
      'lecun_normal', or a flax initializer. Biases start at zero.
    padding: 'VALID' (the Nature network) or 'SAME'.
    uint8_scale: factor on uint8 observations after the float cast (1/255:
      pixels to [0, 1]).
  """
  hidden_sizes = _positive_ints(hidden_sizes, 'AtariCnnBody.hidden_sizes')
  if len(hidden_sizes) != 3:
    raise ConfigError(
        f'AtariCnnBody.hidden_sizes needs one filter count per conv layer (3), got '
        f'{hidden_sizes}; for another conv stack use MinAtarCnnBody.')
  _resolve_kernel_init(kernel_initializer, 'AtariCnnBody')
  return CnnModule(hidden_sizes=hidden_sizes,
                   kernel_sizes=(8, 4, 3),
                   strides=(4, 2, 1),
                   output_size=_positive_int(output_size, 'AtariCnnBody.output_size'),
                   padding=_cnn_padding(padding, 'AtariCnnBody'),
                   n_frames=_positive_int(n_frames, 'AtariCnnBody.n_frames'),
                   uint8_scale=float(uint8_scale),
                   kernel_initializer=kernel_initializer,
                   config_name='AtariCnnBody')


@gin.configurable
def MinAtarCnnBody(n_frames: int = 1,
                   hidden_sizes: Sequence[int] = (16,),
                   kernel_size: int = 3,
                   output_size: int = 128,
                   kernel_initializer: str | Callable = 'orthogonal',
                   padding: str = 'VALID',
                   uint8_scale: float = 1.0) -> CnnModule:
  """Builds the MinAtar paper's small conv body for 10x10xC grids (see `CnnModule`).

  One conv of 16 filters, 3x3, stride 1, ReLU, flatten, Dense(128) + ReLU:
  on a 10x10 grid with 'VALID' padding the Dense layer reads 8 * 8 * 16 =
  1024 features. A separate factory rather than AtariCnnBody configured
  small, because the Nature stack's 8x8 stride-4 first layer needs images of
  at least 36x36. MinAtar's observations, (10, 10, channels) bool, are
  channels last; each channel is one kind of object, not a frame.

  Args:
    n_frames: stacked frames per observation (1: MinAtar's own observations;
      FrameStackObservation on them gives (n, 10, 10, channels)).
    hidden_sizes: filters of each conv layer, one layer per entry.
    kernel_size: kernel height and width of every conv layer (stride 1).
    output_size: width of the final Dense layer.
    kernel_initializer: as AtariCnnBody's.
    padding: 'VALID' (the paper's network) or 'SAME'.
    uint8_scale: factor on uint8 observations after the float cast (1: grids
      of 0/1 stored as uint8 keep their values; bool ones are only cast).
  """
  hidden_sizes = _positive_ints(hidden_sizes, 'MinAtarCnnBody.hidden_sizes')
  kernel_size = _positive_int(kernel_size, 'MinAtarCnnBody.kernel_size')
  _resolve_kernel_init(kernel_initializer, 'MinAtarCnnBody')
  return CnnModule(hidden_sizes=hidden_sizes,
                   kernel_sizes=(kernel_size,) * len(hidden_sizes),
                   strides=(1,) * len(hidden_sizes),
                   output_size=_positive_int(output_size, 'MinAtarCnnBody.output_size'),
                   padding=_cnn_padding(padding, 'MinAtarCnnBody'),
                   n_frames=_positive_int(n_frames, 'MinAtarCnnBody.n_frames'),
                   uint8_scale=float(uint8_scale),
                   kernel_initializer=kernel_initializer,
                   config_name='MinAtarCnnBody')


# ---------------------------------------------------------------------------
# Running observation normalisation
# ---------------------------------------------------------------------------


class NormalizeModule(nn.Module):
  """Normalises observations with running statistics.

  State (collection 'normalizer'): count (scalar), mean and var (both of the
  feature shape x.shape[2:]); initially count 0, mean 0, var 1, so a fresh
  normaliser with epsilon 0 is the identity. All float32.

  `__call__(x, update=False)`: with `update`, the newest observation of each
  batch row, x[:, -1], is folded into the statistics — all B at once with
  the parallel (Chan et al.) mean/variance merge, which gives the same
  result as the reference's one-at-a-time Welford update. Only as many rows
  as keep count <= ceil(sample_limit) are folded, so the limit is exact at
  batch granularity too. The output (x - mean) / (sqrt(var) + epsilon) uses
  the statistics after the update, in all modes.

  `update` must be a Python bool (static under jit): it decides whether the
  'normalizer' collection is written, which must be declared mutable anyway.
  The float32 count is exact up to 2**24 folded observations; past that the
  merge weights are still correct to float32 precision.

  Images: the CNN bodies scale uint8 frames themselves, so images need no
  normaliser. One works (it casts to float32, and the body then takes the
  standardised floats as they are), but its per-pixel statistics are a poor
  fit: a pixel that rarely changes has a variance near zero, and the frame
  in which it does change comes out huge (up to 255 / epsilon).
  """

  sample_limit: float = float('inf')
  epsilon: float = 1e-5

  @nn.compact
  def __call__(self, x: jax.Array, update: bool = False) -> jax.Array:
    if x.ndim < 2:
      raise ValueError(
          f'Normalize expects inputs [B, L, *obs_shape]; got shape {x.shape}.')
    x = jnp.asarray(x, jnp.float32)
    feature_shape = x.shape[2:]
    count = self.variable(NORMALIZER_COLLECTION, 'count',
                          lambda: jnp.zeros((), jnp.float32))
    mean = self.variable(NORMALIZER_COLLECTION, 'mean',
                         lambda: jnp.zeros(feature_shape, jnp.float32))
    var = self.variable(NORMALIZER_COLLECTION, 'var',
                        lambda: jnp.ones(feature_shape, jnp.float32))

    # Initialisation must produce the canonical fresh state (count 0), even
    # if the caller initialises through a collection-mode call.
    if update and not self.is_initializing():
      count.value, mean.value, var.value = self._merge(
          count.value, mean.value, var.value, x[:, -1])

    return (x - mean.value) / (jnp.sqrt(var.value) + self.epsilon)

  def _merge(self, count, mean, var, batch):
    """Folds `batch` [B, *feature_shape] into (count, mean, var)."""
    b = batch.shape[0]
    # How many rows fit under the limit; the rest of the batch is ignored,
    # matching a one-at-a-time update that stops once count >= limit.
    room = jnp.ceil(jnp.float32(self.sample_limit) - count)
    n_take = jnp.clip(room, 0.0, float(b))
    row_weights = (jnp.arange(b, dtype=jnp.float32) < n_take).astype(jnp.float32)
    n_b = jnp.sum(row_weights)
    weights = jnp.reshape(row_weights, (b,) + (1,) * (batch.ndim - 1))
    safe_n_b = jnp.maximum(n_b, 1.0)
    mean_b = jnp.sum(weights * batch, axis=0) / safe_n_b
    var_b = jnp.sum(weights * jnp.square(batch - mean_b), axis=0) / safe_n_b

    n = count + n_b
    safe_n = jnp.maximum(n, 1.0)
    delta = mean_b - mean
    new_mean = mean + delta * (n_b / safe_n)
    # Sum of squared deviations of the union = both parts' own sums plus
    # the between-group term. With count 0 the old var (1) gets weight 0,
    # so the initial var never leaks into the statistics.
    m2 = var * count + var_b * n_b + jnp.square(delta) * (count * n_b / safe_n)
    new_var = m2 / safe_n

    # Bit-exact no-op when nothing was folded (limit reached).
    folded = n_b > 0
    return (jnp.where(folded, n, count).astype(jnp.float32),
            jnp.where(folded, new_mean, mean).astype(jnp.float32),
            jnp.where(folded, new_var, var).astype(jnp.float32))


@gin.configurable
def Normalize(sample_limit: float = float('inf'), epsilon: float = 1e-5) -> NormalizeModule:
  """Builds a running observation normaliser (see `NormalizeModule`)."""
  return NormalizeModule(sample_limit=float(sample_limit), epsilon=float(epsilon))


# ---------------------------------------------------------------------------
# Helpers shared by the models
# ---------------------------------------------------------------------------


def _build(factory_or_module: Any, default: Callable[[], nn.Module] | None) -> nn.Module | None:
  """Turns a gin-style factory (or an already built module) into a fresh module."""
  if factory_or_module is None:
    return default() if default is not None else None
  if isinstance(factory_or_module, nn.Module):
    # A module instance may be reused by several models (or twice in one,
    # for separate bodies); clone so each use gets its own unbound copy.
    return factory_or_module.clone()
  if callable(factory_or_module):
    module = factory_or_module()
    if not isinstance(module, nn.Module):
      raise TypeError(
          f'Expected a factory returning a flax.linen Module, got {module!r}.')
    return module
  raise TypeError(f'Expected a Module factory, got {factory_or_module!r}.')


def _n_inputs(policy_distribution: Any) -> int:
  try:
    n = int(policy_distribution.n_inputs)
  except AttributeError as e:
    raise TypeError(
        'policy_distribution must have an integer attribute `n_inputs`; '
        f'got {policy_distribution!r}.') from e
  if n <= 0:
    raise ValueError(f'policy_distribution.n_inputs must be positive, got {n}.')
  return n


def _normalize(normalizer: nn.Module | None, obs: jax.Array,
               update_normalizer: bool) -> jax.Array:
  if normalizer is None:
    return obs
  return normalizer(obs, update=update_normalizer)


# ---------------------------------------------------------------------------
# Models
# ---------------------------------------------------------------------------


class PolicyModel(nn.Module):
  """normalizer -> body -> 'policy_head' Dense(n_inputs): [B, L, n_inputs]."""

  body: nn.Module
  n_inputs: int
  normalizer: nn.Module | None = None
  head_init_range: float | None = None

  def setup(self):
    self.policy_head = _head(self.n_inputs, self.head_init_range, _POLICY_HEAD_GAIN)

  def __call__(self, obs, update_normalizer: bool = False):
    x = _normalize(self.normalizer, obs, update_normalizer)
    return self.policy_head(self.body(x))


@gin.configurable(denylist=['policy_distribution'])
def Policy(policy_distribution: Any,
           body: Callable[[], nn.Module] | None = None,
           normalizer: Callable[[], nn.Module] | None = None,
           head_init_range: float | None = None) -> PolicyModel:
  """Policy network producing distribution inputs [B, L, dist.n_inputs]."""
  return PolicyModel(body=_build(body, MLP),
                     n_inputs=_n_inputs(policy_distribution),
                     normalizer=_build(normalizer, None),
                     head_init_range=head_init_range)


class ActionInjector(nn.Module):
  """Combines state features with actions for Q-functions.

  features [B, L, F] -> Dense(dim); actions -> Embed(vocab, dim) if discrete
  else Dense(dim); combined by sum, or by features * tanh(action_emb)
  followed by LayerNorm (multiplicative); then `mlp` (built by `Value`:
  inject_actions_n_layers Dense layers of width dim, activation on the
  output too, activation taken from MLP's gin configuration as in the
  reference).

  Action shapes (S = any number of extra sample axes, e.g. [n_samples]):
    discrete:   [B, *S, L]              (integer actions)
    continuous: [B, *S, L, action_dim]  (vector actions; reshape others)
  The features are broadcast over S. Output: [B, *S, L, dim].
  """

  mlp: nn.Module
  dim: int = 64
  is_discrete: bool = True
  vocab_size: int = 2
  multiplicative: bool = False

  @nn.compact
  def __call__(self, features: jax.Array, actions: jax.Array) -> jax.Array:
    if features.ndim != 3:
      raise ValueError(
          f'Action injection expects body features [B, L, F]; got {features.shape}.')
    actions = jnp.asarray(actions)
    if self.is_discrete:
      emb = nn.Embed(self.vocab_size, self.dim, name='action_embedding')(
          actions.astype(jnp.int32))
    else:
      if actions.ndim < 3:
        raise ValueError(
            'Continuous actions must be [B, *S, L, action_dim]; got shape '
            f'{actions.shape}.')
      emb = nn.Dense(self.dim, kernel_init=_HIDDEN_KERNEL_INIT,
                     bias_init=nn.initializers.zeros, name='action_dense')(
                         actions.astype(jnp.float32))
    # emb is [B, *S, L, dim]; line the features up as [B, 1.., L, dim].
    b, l = features.shape[:2]
    if emb.ndim < 3 or emb.shape[0] != b or emb.shape[-2] != l:
      raise ValueError(
          f'Actions of shape {actions.shape} do not match observations with '
          f'batch {b} and slice length {l} (discrete: [B, *S, L]; '
          'continuous: [B, *S, L, action_dim]).')
    x = nn.Dense(self.dim, kernel_init=_HIDDEN_KERNEL_INIT,
                 bias_init=nn.initializers.zeros, name='features_dense')(features)
    n_extra = emb.ndim - 3
    x = jnp.reshape(x, (b,) + (1,) * n_extra + (l, self.dim))
    if self.multiplicative:
      # tanh bounds the action's gain on each feature; LayerNorm restores
      # a stable scale after the product.
      x = nn.LayerNorm(name='layer_norm')(x * jnp.tanh(emb))
    else:
      x = x + emb
    return self.mlp(x)


class ValueModel(nn.Module):
  """normalizer -> body -> [action_injector] -> 'value_head' Dense(1).

  V(s): obs [B, L, ...] -> [B, L, 1].
  Q(s, a) (with an action_injector): `(obs, actions)` -> [B, *S, L, 1],
  with actions shaped as documented in `ActionInjector`.
  """

  body: nn.Module
  normalizer: nn.Module | None = None
  action_injector: nn.Module | None = None
  head_init_range: float | None = None

  def setup(self):
    self.value_head = _head(1, self.head_init_range, _VALUE_HEAD_GAIN)

  def __call__(self, obs, actions=None, update_normalizer: bool = False):
    injects = self.action_injector is not None
    if injects and actions is None:
      raise ValueError('This Value model injects actions: call it as (obs, actions).')
    if not injects and actions is not None:
      raise ValueError('Actions were given to a Value model built with '
                       'inject_actions=False.')
    x = self.body(_normalize(self.normalizer, obs, update_normalizer))
    if injects:
      x = self.action_injector(x, actions)
    return self.value_head(x)


@gin.configurable
def Value(body: Callable[[], nn.Module] | None = None,
          normalizer: Callable[[], nn.Module] | None = None,
          head_init_range: float | None = None,
          inject_actions: bool = False,
          is_discrete: bool = True,
          vocab_size: int = 2,
          inject_actions_dim: int = 64,
          inject_actions_n_layers: int = 1,
          multiplicative_action_injection: bool = False) -> ValueModel:
  """Value network V(s) -> [B, L, 1], or Q(s, a) with `inject_actions`."""
  injector = None
  if inject_actions:
    dim = int(inject_actions_dim)
    # Built through the gin factory (outside any module) so its activation
    # follows the configured MLP activation, as in the reference.
    mlp = MLP(layer_widths=(dim,) * int(inject_actions_n_layers),
              out_activation=True, flatten=False)
    injector = ActionInjector(mlp=mlp, dim=dim, is_discrete=is_discrete,
                              vocab_size=int(vocab_size),
                              multiplicative=multiplicative_action_injection)
  return ValueModel(body=_build(body, MLP),
                    normalizer=_build(normalizer, None),
                    action_injector=injector,
                    head_init_range=head_init_range)


class PolicyAndValueModel(nn.Module):
  """Shared normaliser; one shared 'body' (joint) or 'policy_body' and
  'value_body' (separate). Returns (dist_inputs [B, L, n], values [B, L, 1])."""

  n_inputs: int
  body: nn.Module | None = None
  policy_body: nn.Module | None = None
  value_body: nn.Module | None = None
  normalizer: nn.Module | None = None
  head_init_range: float | None = None

  def setup(self):
    joint = self.body is not None
    separate = self.policy_body is not None and self.value_body is not None
    if joint == separate:
      raise ConfigError('PolicyAndValueModel needs either `body` (joint) or both '
                       '`policy_body` and `value_body` (separate).')
    self.policy_head = _head(self.n_inputs, self.head_init_range, _POLICY_HEAD_GAIN)
    self.value_head = _head(1, self.head_init_range, _VALUE_HEAD_GAIN)

  def __call__(self, obs, update_normalizer: bool = False):
    x = _normalize(self.normalizer, obs, update_normalizer)
    if self.body is not None:
      policy_features = value_features = self.body(x)
    else:
      policy_features = self.policy_body(x)
      value_features = self.value_body(x)
    return self.policy_head(policy_features), self.value_head(value_features)


@gin.configurable(denylist=['policy_distribution'])
def PolicyAndValue(policy_distribution: Any,
                   body: Callable[[], nn.Module] | None = None,
                   normalizer: Callable[[], nn.Module] | None = None,
                   joint: bool = True,
                   head_init_range: float | None = None) -> PolicyAndValueModel:
  """Policy and value heads on one body (joint) or on two separate bodies."""
  n_inputs = _n_inputs(policy_distribution)
  norm = _build(normalizer, None)
  if joint:
    return PolicyAndValueModel(n_inputs=n_inputs, body=_build(body, MLP),
                               normalizer=norm, head_init_range=head_init_range)
  # Two calls of the factory: two independent bodies with their own params.
  return PolicyAndValueModel(n_inputs=n_inputs,
                             policy_body=_build(body, MLP),
                             value_body=_build(body, MLP),
                             normalizer=norm, head_init_range=head_init_range)


class QualityModel(nn.Module):
  """normalizer -> body -> 'quality_head' Dense(n_actions): [B, L, n_actions]."""

  body: nn.Module
  n_actions: int = 2
  normalizer: nn.Module | None = None
  head_init_range: float | None = None

  def setup(self):
    self.quality_head = _head(self.n_actions, self.head_init_range, _VALUE_HEAD_GAIN)

  def __call__(self, obs, update_normalizer: bool = False):
    x = _normalize(self.normalizer, obs, update_normalizer)
    return self.quality_head(self.body(x))


@gin.configurable
def Quality(n_actions: int = 2,
            body: Callable[[], nn.Module] | None = None,
            normalizer: Callable[[], nn.Module] | None = None,
            head_init_range: float | None = None) -> QualityModel:
  """Q-network with one output per discrete action."""
  return QualityModel(body=_build(body, MLP), n_actions=int(n_actions),
                      normalizer=_build(normalizer, None),
                      head_init_range=head_init_range)


# ---------------------------------------------------------------------------
# Variables: init, layer structure, weight sharing
# ---------------------------------------------------------------------------


def _to_dict(tree: Any) -> Any:
  """Recursively turns Mappings (e.g. FrozenDict) into plain dicts; leaves
  are kept as they are (jax arrays are immutable, so sharing them is safe)."""
  if isinstance(tree, Mapping):
    return {k: _to_dict(v) for k, v in tree.items()}
  return tree


def init_variables(module: nn.Module, key: jax.Array, obs_example: jax.Array,
                   *extra_inputs: Any) -> dict:
  """`module.init(key, obs_example, *extra_inputs)` as a plain dict."""
  return _to_dict(module.init(key, obs_example, *extra_inputs))


# Canonical order of top-level layers, mirroring the reference's
# Serial(normalizer, body, [injector], head). Parameter dicts do not reliably
# keep creation order, so the order is defined by name here.
_LAYER_ORDER = ('normalizer', 'body', 'policy_body', 'value_body', 'action_injector',
                'policy_head', 'value_head', 'quality_head')


def top_level_layers(variables_params: Mapping) -> list[str]:
  """Ordered names of a model's top-level layers, as `n_shared_layers` counts them.

  Accepts a full variables dict ({'params': ..., 'normalizer': ...}) or a
  bare params dict. The normaliser has no params; it is detected through the
  'normalizer' collection and, when present, is always layer 0. Names
  outside the known vocabulary go last, sorted.
  """
  if 'params' in variables_params:
    names = set(variables_params['params'].keys())
    for collection, tree in variables_params.items():
      if collection != 'params' and isinstance(tree, Mapping):
        names.update(tree.keys())
  else:
    names = set(variables_params.keys())
  known = [n for n in _LAYER_ORDER if n in names]
  unknown = sorted(n for n in names if n not in _LAYER_ORDER)
  return known + unknown


def _structure(tree: Any) -> Any:
  return jax.tree_util.tree_map(lambda a: (tuple(jnp.shape(a)), jnp.result_type(a)), tree)


def copy_shared_layers(src_variables: Mapping, dst_variables: Mapping, n_layers: int) -> dict:
  """Returns dst_variables with its first `n_layers` top-level layers taken from src.

  Every collection is copied for those layers ('params', and the
  'normalizer' statistics when the normaliser is among them). Pure: neither
  input is modified; the result is a new nested dict.

  Raises ValueError if n_layers is out of range, or if the first n layers of
  the two models differ in names or in parameter/state structure.
  """
  if 'params' not in src_variables or 'params' not in dst_variables:
    raise ValueError("copy_shared_layers expects full variables dicts with a 'params' key.")
  if n_layers < 0:
    raise ValueError(f'n_layers must be >= 0, got {n_layers}.')
  result = _to_dict(dst_variables)
  if n_layers == 0:
    return result
  src_layers = top_level_layers(src_variables)
  dst_layers = top_level_layers(dst_variables)
  if n_layers > min(len(src_layers), len(dst_layers)):
    raise ValueError(
        f'Cannot share {n_layers} layers: source has layers {src_layers}, '
        f'destination has layers {dst_layers}.')
  if src_layers[:n_layers] != dst_layers[:n_layers]:
    raise ValueError(
        f'The first {n_layers} layers differ: source {src_layers[:n_layers]} vs '
        f'destination {dst_layers[:n_layers]}.')

  collections = sorted(set(src_variables) | set(dst_variables))
  for name in src_layers[:n_layers]:
    for collection in collections:
      in_src = name in src_variables.get(collection, {})
      in_dst = name in dst_variables.get(collection, {})
      if not in_src and not in_dst:
        continue
      if in_src != in_dst:
        raise ValueError(
            f"Layer '{name}' has collection '{collection}' in only one of the "
            'two models; their layer structures differ.')
      src_tree = src_variables[collection][name]
      dst_tree = dst_variables[collection][name]
      if _structure(src_tree) != _structure(dst_tree):
        raise ValueError(
            f"Layer '{name}' ({collection}) has a different structure in the "
            f'source and destination:\n  source: {_structure(src_tree)}\n'
            f'  destination: {_structure(dst_tree)}')
      result[collection][name] = _to_dict(src_tree)
  return result
