"""The CNN bodies: `AtariCnnBody` for pixel frames, `MinAtarCnnBody` for small grids.

They take observations as the env stores them, uint8 frames included, and
scale them to floats themselves (see `CnnModule`), so buffers stay uint8 and
no normaliser is needed. A CNN body on vector observations stops at
initialisation with a ConfigError naming the MLP body.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import flax.linen as nn
import jax
import jax.numpy as jnp

from rl.configurables import configurable
from rl.errors import ConfigError
from rl.nets.initializers import HIDDEN_KERNEL_INIT
from rl.nets.lookup import by_name

# Kernel initialisers the CNN bodies accept by name (gin binds strings more
# easily than initialiser objects).
_CNN_KERNEL_INITS: dict[str, Callable] = {
    # The MLP body's init (see HIDDEN_KERNEL_INIT); CleanRL's Atari PPO uses
    # it for its conv layers too.
    'orthogonal': HIDDEN_KERNEL_INIT,
    # U(-1/sqrt(fan_in), 1/sqrt(fan_in)), fan_in = kernel height * width *
    # input channels: the reference's Atari conv init. A uniform variance
    # scaling with scale 1/3 has exactly that bound, sqrt(3 * scale / fan_in).
    'atari_conv': nn.initializers.variance_scaling(1.0 / 3.0, 'fan_in', 'uniform'),
    'glorot_uniform': nn.initializers.glorot_uniform(),
    'lecun_normal': nn.initializers.lecun_normal(),
}

_CNN_PADDINGS = ('VALID', 'SAME')


def _resolve_kernel_init(kernel_initializer: str | Callable, config_name: str) -> Callable:
  return by_name(kernel_initializer, _CNN_KERNEL_INITS, f'{config_name}.kernel_initializer')


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


@configurable
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
  stacked consecutive timesteps of a slice (the reference's design) would
  see no history when it acts.

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


@configurable
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
