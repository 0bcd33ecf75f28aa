"""The Transformer body: causal self-attention over a window of the episode's last steps.

A policy with this body acts on more than the current observation. The task
gives every step the window of its episode's last K observations
(RLTask.context_length = K; rl.envs.episode_context): an array [K, F + 1],
oldest first, whose last column flags the real steps (1) apart from the
padding (0) that fills the window at an episode's start. So each stored step
carries exactly what the policy saw when it acted, and training recomputes
a step's outputs from that same window, whatever slice, epoch or resume
the step falls in: a step never sees the future or another episode.

Per step, [K, F + 1] -> Dense(d_model) + a learned embedding of each
position's age (0: the current step) -> n_layers pre-LayerNorm blocks of
causal multi-head self-attention and a ReLU feed-forward layer of d_ff ->
LayerNorm; the current step's features [d_model] come out. Padding is
masked out of every attention. The last block computes only the current
step's query, since nothing reads the others.
"""

from __future__ import annotations

import flax.linen as nn
import jax
import jax.numpy as jnp

from rl.configurables import configurable
from rl.errors import ConfigError


def _check_window(x, max_len):
  """Refuses inputs that are not windows [B, L, K, F + 1] of at most max_len steps."""
  if x.ndim == 5:
    raise ConfigError(
        f'TransformerDecoder got image observations {tuple(x.shape[2:])}; it reads windows of '
        'feature vectors and has no CNN front: use @AtariCnnBody or @MinAtarCnnBody for '
        'images.')
  if x.ndim != 4:
    raise ConfigError(
        f'TransformerDecoder reads windows of the episode\'s last steps [B, L, K, features], '
        f'got inputs of shape {tuple(x.shape)}: set RLTask.context_length (e.g. 16).')
  if x.shape[2] > max_len:
    raise ConfigError(
        f'RLTask.context_length = {x.shape[2]} is longer than TransformerDecoder.max_len = '
        f'{max_len}; raise max_len or shorten the context.')


class _Block(nn.Module):
  """One pre-LayerNorm decoder block: attention, then a feed-forward layer, both residual."""

  d_model: int
  d_ff: int
  n_heads: int
  last_only: bool  # compute the newest position's output only

  @nn.compact
  def __call__(self, h, mask):
    normed = nn.LayerNorm(name='attention_norm')(h)
    query = normed[:, -1:] if self.last_only else normed
    attention = nn.MultiHeadDotProductAttention(
        num_heads=self.n_heads, qkv_features=self.d_model, name='attention')
    if self.last_only:
      h, mask = h[:, -1:], mask[:, :, -1:]
    h = h + attention(query, normed, normed, mask=mask)
    ff = nn.LayerNorm(name='ff_norm')(h)
    ff = nn.Dense(self.d_ff, name='ff_in')(ff)
    ff = nn.Dense(self.d_model, name='ff_out')(nn.relu(ff))
    return h + ff


class TransformerDecoderModule(nn.Module):
  """[B, L, K, F + 1] windows -> [B, L, d_model] features of each window's newest step."""

  d_model: int = 64
  d_ff: int = 256
  n_heads: int = 4
  n_layers: int = 2
  max_len: int = 64
  # Read by the models (rl.nets.heads): a normaliser would standardise the flags.
  reads_windows = True

  @nn.compact
  def __call__(self, x: jax.Array) -> jax.Array:
    _check_window(x, self.max_len)
    b, l, k = x.shape[:3]
    x = jnp.reshape(jnp.asarray(x, jnp.float32), (b * l, k, x.shape[-1]))
    features, real = x[..., :-1], x[..., -1] > 0.5
    h = nn.Dense(self.d_model, name='embedding')(features)
    ages = self.param('age_embedding', nn.initializers.normal(0.02),
                      (self.max_len, self.d_model))
    # Position p of the window holds the step k - 1 - p steps back.
    h = h + ages[:k][::-1]
    # Query i sees keys j <= i that are real steps; padded queries see
    # themselves so that no softmax row is empty (their outputs are never read).
    causal = jnp.tril(jnp.ones((k, k), bool))
    mask = causal & (real[:, None, :] | jnp.eye(k, dtype=bool))
    mask = mask[:, None]  # one mask for every head
    for i in range(self.n_layers):
      h = _Block(self.d_model, self.d_ff, self.n_heads, last_only=i == self.n_layers - 1,
                 name=f'block_{i}')(h, mask)
    h = nn.LayerNorm(name='out_norm')(h[:, -1])
    return jnp.reshape(h, (b, l, self.d_model))


@configurable
def TransformerDecoder(d_model: int = 64,
                       d_ff: int = 256,
                       n_heads: int = 4,
                       n_layers: int = 2,
                       dropout: float = 0.0,
                       max_len: int = 64) -> TransformerDecoderModule:
  """Builds a Transformer body over the episode's last steps (see `TransformerDecoderModule`).

  Needs RLTask.context_length: the number of steps each window holds.

  Args:
    d_model: width of the embeddings and of every block's output; a
      multiple of n_heads.
    d_ff: width of each block's feed-forward layer.
    n_heads: attention heads per block; each reads d_model / n_heads features.
    n_layers: decoder blocks.
    dropout: must be 0. Acting and training must compute the same function
      of a step's window (PPO's first ratio is 1, a stored log-probability
      is the one recomputed), which dropout in training would break.
    max_len: the longest window the age embedding covers; RLTask.context_length
      must not exceed it.
  """
  d_model, n_heads = int(d_model), int(n_heads)
  for name, value in (('d_model', d_model), ('d_ff', d_ff), ('n_heads', n_heads),
                      ('n_layers', n_layers), ('max_len', max_len)):
    if int(value) < 1:
      raise ConfigError(f'TransformerDecoder.{name} must be >= 1, got {value}.')
  if d_model % n_heads:
    raise ConfigError(f'TransformerDecoder.d_model = {d_model} must be a multiple of '
                      f'n_heads = {n_heads}.')
  if float(dropout) != 0.0:
    raise ConfigError(
        f'TransformerDecoder.dropout = {dropout}: rl trains sequence policies without dropout, '
        'so that training recomputes exactly what the policy computed when it acted; set 0.')
  return TransformerDecoderModule(d_model=d_model, d_ff=int(d_ff), n_heads=n_heads,
                                  n_layers=int(n_layers), max_len=int(max_len))
