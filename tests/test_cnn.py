"""Tests for the CNN bodies of rl.nets.cnn: AtariCnnBody and MinAtarCnnBody as
bodies of every model, uint8 scaling, frame layouts, parameter counts, gin
binding, and the one-line errors for observations they cannot read.

Speed. On CPU these tests cost what XLA spends compiling, so only two
networks are really initialised and run, jitted as the trainers run them
(one Atari, one MinAtar, shared through module fixtures); shapes and errors
come from `jax.eval_shape`, which traces a function without compiling or
running it.
"""

import functools

import gin
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from net_helpers import FakeDistribution, shapes
from rl import experiment as run_lib
from rl.errors import ConfigError
from rl.nets import cnn
from rl.nets.cnn import AtariCnnBody, MinAtarCnnBody
from rl.nets.heads import Policy, PolicyAndValue, Quality, Value
from rl.nets.normalizer import Normalize
from rl.nets.variables import init_variables
from run_helpers import REINFORCE, TINY


N = 6  # actions; any width does

# Two slices of one timestep of 4 stacked 84x84 frames, channels last, with
# every byte value likely present, so scaling mistakes show.
FRAMES = np.random.default_rng(0).integers(0, 256, (2, 1, 84, 84, 4), dtype=np.uint8)
# MinAtar Breakout's observations: 10x10 grids of 4 object channels, bool.
GRIDS = np.random.default_rng(1).random((2, 1, 10, 10, 4)) < 0.3

# The reference's Atari init: uniform, so initialising skips the orthogonal
# default's costly QR of the 3136x512 Dense kernel. The MinAtar network runs
# the orthogonal default.
_atari_body = functools.partial(AtariCnnBody, kernel_initializer='atari_conv')


def _init(model, obs):
  # One compiled program, as the network Trainer initialises its model;
  # op-by-op initialisation compiles every conv and initialiser apart.
  return jax.jit(model.init)(jax.random.key(0), obs)


def _abstract_params(body, obs):
  return jax.eval_shape(body.init, jax.random.key(0), obs)['params']


def _output_shapes(model, *inputs):
  """The shapes of model(*inputs) after init, traced only."""

  def forward():
    return model.apply(model.init(jax.random.key(0), *inputs), *inputs)

  return jax.tree_util.tree_map(lambda a: a.shape, jax.eval_shape(forward))


def _n_params(params):
  return sum(int(np.prod(leaf.shape)) for leaf in jax.tree_util.tree_leaves(params))


@pytest.fixture(scope='module')
def quality():
  """(jitted apply, variables) of a DQN-style Q-network on Atari frames."""
  model = Quality(n_actions=N, body=_atari_body)
  return jax.jit(model.apply), _init(model, FRAMES)


@pytest.fixture(scope='module')
def minatar_quality():
  """(jitted apply, variables) of a Q-network on MinAtar grids (orthogonal init)."""
  model = Quality(n_actions=N, body=MinAtarCnnBody)
  return jax.jit(model.apply), _init(model, GRIDS)


# --------------------------------------------------------------------------
# As the body of every model
# --------------------------------------------------------------------------


def test_q_networks_compute_on_frames_and_grids(quality, minatar_quality):
  for apply, variables, obs in (quality + (FRAMES,), minatar_quality + (GRIDS,)):
    q = apply(variables, obs)
    assert q.shape == (2, 1, N) and q.dtype == jnp.float32
    assert bool(jnp.all(jnp.isfinite(q))) and not np.allclose(q[0], q[1])


@pytest.mark.parametrize('body', [AtariCnnBody, MinAtarCnnBody])
def test_every_model_takes_the_cnn_body(body):
  dist = FakeDistribution(N)
  obs = FRAMES if body is AtariCnnBody else GRIDS.astype(np.uint8)
  assert _output_shapes(Policy(dist, body=body), obs) == (2, 1, N)
  assert _output_shapes(Value(body=body), obs) == (2, 1, 1)
  assert _output_shapes(Quality(n_actions=N, body=body), obs) == (2, 1, N)
  for joint in (True, False):
    model = PolicyAndValue(dist, body=body, joint=joint)
    assert _output_shapes(model, obs) == ((2, 1, N), (2, 1, 1))
  # Q(s, a) with sampled actions [B, n_samples, L]: the action injector reads
  # the body's [B, L, features].
  q_model = Value(body=body, inject_actions=True, vocab_size=N)
  assert _output_shapes(q_model, obs, jnp.zeros((2, 3, 1), jnp.int32)) == (2, 3, 1, 1)


def test_slices_of_several_timesteps():
  model = PolicyAndValue(FakeDistribution(N), body=MinAtarCnnBody)
  grids = np.zeros((2, 5, 10, 10, 4), bool)  # [B, L=5, grid]
  assert _output_shapes(model, grids) == ((2, 5, N), (2, 5, 1))


# --------------------------------------------------------------------------
# Input scaling and layouts
# --------------------------------------------------------------------------


def test_uint8_frames_are_scaled_inside_the_model(quality):
  apply, variables = quality
  from_bytes = apply(variables, FRAMES)
  # The same pixels as floats in [0, 1] are taken as they are.
  np.testing.assert_allclose(apply(variables, FRAMES / np.float32(255)), from_bytes,
                             rtol=1e-5, atol=1e-6)
  # Floats are not divided again: 0..255 floats give other Q-values.
  assert not np.allclose(apply(variables, FRAMES.astype(np.float32)), from_bytes)


def test_frames_stacked_first_read_as_channels(quality):
  apply, variables = quality
  channels_last = apply(variables, FRAMES)
  # gymnasium's FrameStackObservation layout: (4, 84, 84), or (4, 84, 84, 1)
  # with AtariPreprocessing(grayscale_newaxis=True).
  frames_first = np.moveaxis(FRAMES, -1, 2)
  assert frames_first.shape == (2, 1, 4, 84, 84)
  np.testing.assert_allclose(apply(variables, frames_first), channels_last, rtol=1e-5)
  np.testing.assert_allclose(apply(variables, frames_first[..., None]), channels_last,
                             rtol=1e-5)


def test_minatar_grids_bool_and_uint8_agree(minatar_quality):
  apply, variables = minatar_quality
  # MinAtar's 0/1 grids keep their values as uint8 too (uint8_scale 1).
  np.testing.assert_allclose(apply(variables, GRIDS.astype(np.uint8)),
                             apply(variables, GRIDS), rtol=1e-6)


def test_normalizer_in_front_of_a_cnn_body_runs_on_uint8(minatar_quality):
  # Not needed for images (the body scales them), but it must not break.
  _, variables = minatar_quality
  model = Quality(n_actions=N, body=MinAtarCnnBody, normalizer=Normalize)
  grids = GRIDS.astype(np.uint8)
  # The Q-network's parameters plus fresh statistics: the normaliser has no
  # parameters, so the two models' 'params' agree.
  stats = init_variables(Normalize(), jax.random.key(0), grids)
  variables = {**variables, 'normalizer': {'normalizer': stats['normalizer']}}
  out, updates = jax.jit(functools.partial(model.apply, update_normalizer=True,
                                           mutable=['normalizer']))(variables, grids)
  assert out.shape == (2, 1, N) and bool(jnp.all(jnp.isfinite(out)))
  assert float(updates['normalizer']['normalizer']['count']) == 2.0


# --------------------------------------------------------------------------
# Architecture
# --------------------------------------------------------------------------


def test_atari_body_is_the_nature_dqn_network():
  params = _abstract_params(AtariCnnBody(), FRAMES)
  assert shapes(params) == {
      'conv_0': {'kernel': (8, 8, 4, 32), 'bias': (32,)},  # 84 -> 20
      'conv_1': {'kernel': (4, 4, 32, 64), 'bias': (64,)},  # 20 -> 9
      'conv_2': {'kernel': (3, 3, 64, 64), 'bias': (64,)},  # 9 -> 7
      'dense': {'kernel': (7 * 7 * 64, 512), 'bias': (512,)},
  }
  # 8224 + 32832 + 36928 + 1606144, counted by hand from the layers above.
  nature_dqn = ((8 * 8 * 4 * 32 + 32) + (4 * 4 * 32 * 64 + 64) + (3 * 3 * 64 * 64 + 64)
                + (3136 * 512 + 512))
  assert _n_params(params) == nature_dqn == 1_684_128


def test_minatar_body_is_the_minatar_paper_network():
  params = _abstract_params(MinAtarCnnBody(), GRIDS)
  assert shapes(params) == {
      'conv_0': {'kernel': (3, 3, 4, 16), 'bias': (16,)},  # 10 -> 8
      'dense': {'kernel': (8 * 8 * 16, 128), 'bias': (128,)},
  }
  assert _n_params(params) == (3 * 3 * 4 * 16 + 16) + (1024 * 128 + 128)


def test_atari_conv_init_bounds(quality):
  body = quality[1]['params']['body']
  # Uniform in +-1/sqrt(fan_in): fan_in 8 * 8 * 4 = 256 for the first conv,
  # 3136 for the Dense layer; biases start at zero.
  for name, fan_in in (('conv_0', 256), ('dense', 3136)):
    largest = float(jnp.max(jnp.abs(body[name]['kernel'])))
    assert 0.9 / np.sqrt(fan_in) < largest <= 1 / np.sqrt(fan_in)
    np.testing.assert_array_equal(body[name]['bias'], 0.0)


def test_gin_binds_the_cnn_body():
  gin.parse_config([
      'Quality.body = @AtariCnnBody',
      'AtariCnnBody.output_size = 64',
  ])
  model = Quality(n_actions=N)
  assert _abstract_params(model, FRAMES)['body']['dense']['kernel'].shape == (3136, 64)
  assert _output_shapes(model, FRAMES) == (2, 1, N)


# --------------------------------------------------------------------------
# Observations a CNN body cannot read, bad bindings
# --------------------------------------------------------------------------


@pytest.mark.parametrize('body', [AtariCnnBody, MinAtarCnnBody])
def test_vector_observations_are_a_config_error(body):
  with pytest.raises(ConfigError, match=r'shape \(4,\); use an MLP body'):
    _abstract_params(Value(body=body), jnp.zeros((1, 1, 4), jnp.float32))


def test_cnn_body_on_cartpole_stops_before_writing(tmp_path):
  out = tmp_path / 'run'
  with pytest.raises(ConfigError) as info:
    run_lib.execute([REINFORCE], TINY + ['Policy.body = @AtariCnnBody'], str(out))
  message = str(info.value)
  assert '\n' not in message
  assert 'AtariCnnBody needs image observations' in message and '@MLP' in message
  assert not out.exists()


@pytest.mark.parametrize('shape, needle', [
    ((84, 84), 'set AtariCnnBody.n_frames'),  # one frame, n_frames 4
    ((84, 84, 3), 'set AtariCnnBody.n_frames'),  # RGB, no stack
    ((2, 84, 84), 'set AtariCnnBody.n_frames'),  # 2 frames first: too small as (H, W, C)
    ((4, 84, 84, 1, 1), 'rank 2 to 4'),
])
def test_unreadable_frames_name_the_binding(shape, needle):
  with pytest.raises(ConfigError, match=needle):
    _abstract_params(AtariCnnBody(), jnp.zeros((1, 1) + shape, jnp.uint8))


@pytest.mark.parametrize('binding', [
    'AtariCnnBody.hidden_sizes = (32, 64)',
    "AtariCnnBody.padding = 'FULL'",
    "AtariCnnBody.kernel_initializer = 'zeros'",
    'AtariCnnBody.n_frames = 0',
    'MinAtarCnnBody.output_size = -1',
])
def test_bad_bindings_fail_when_built(binding):
  gin.parse_config([binding])
  name, parameter = binding.split(' =')[0].split('.')
  with pytest.raises(ConfigError, match=f'{name}.{parameter}'):
    getattr(cnn, name)()
