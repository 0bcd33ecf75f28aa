"""The models: policy, value (V or Q with injected actions), policy-and-value
and Q-value heads on a body, with an optional normaliser in front.

Each model runs normalizer -> body -> head(s); the submodule names ('normalizer',
'body', 'policy_body', 'value_body', 'action_injector', '*_head') are the
top-level layers `rl.nets.variables` counts when models share layers.
`update_normalizer` is a Python bool: close over it (or mark it static) when
jitting.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import flax.linen as nn
import jax
import jax.numpy as jnp

from rl.configurables import configurable
from rl.errors import ConfigError
from rl.nets.dense import Dense
from rl.nets.initializers import HIDDEN_KERNEL_INIT
from rl.nets.initializers import symmetric_uniform
from rl.nets.mlp import MLP

# Default head gains. A policy head with tiny weights emits near-equal logits
# (or near-zero Gaussian means), i.e. a near-uniform initial policy that
# explores evenly and does not commit to an action before any learning
# signal. Value/Q heads use gain 1 so predictions start at the scale of the
# features and can follow the targets' scale quickly.
_POLICY_HEAD_GAIN = 0.01
_VALUE_HEAD_GAIN = 1.0


def _head_kernel_init(head_init_range: float | None, default_gain: float) -> Callable:
  if head_init_range is not None:
    if head_init_range <= 0:
      raise ConfigError(f'head_init_range must be positive, got {head_init_range}.')
    return symmetric_uniform(float(head_init_range))
  return nn.initializers.orthogonal(scale=default_gain)


def _head(features: int, head_init_range: float | None, default_gain: float,
          name: str | None = None) -> Dense:
  return Dense(
      features,
      kernel_init=_head_kernel_init(head_init_range, default_gain),
      bias_init=nn.initializers.zeros,
      name=name,
  )


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


def _check_body_and_normalizer(body: nn.Module | None, normalizer: nn.Module | None):
  """Refuses a normaliser in front of a body that reads episode windows.

  A window's last column flags its real steps (rl.envs.episode_context);
  standardised, the flags could not tell the padding apart.
  """
  if normalizer is not None and getattr(body, 'reads_windows', False):
    raise ConfigError('a normalizer in front of @TransformerDecoder would standardise the '
                      "windows' real-step flags; remove the model's normalizer binding.")


def _normalize(normalizer: nn.Module | None, obs: jax.Array,
               update_normalizer: bool) -> jax.Array:
  if normalizer is None:
    return obs
  return normalizer(obs, update=update_normalizer)


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


@configurable(denylist=['policy_distribution'])
def Policy(policy_distribution: Any,
           body: Callable[[], nn.Module] | None = None,
           normalizer: Callable[[], nn.Module] | None = None,
           head_init_range: float | None = None) -> PolicyModel:
  """Policy network producing distribution inputs [B, L, dist.n_inputs].

  Args:
    policy_distribution: the action distribution whose inputs the head
      outputs (passed by the trainer, not bindable in gin).
    body: body factory (gin: @MLP, @AtariCnnBody, @MinAtarCnnBody,
      @TransformerDecoder); None: @MLP.
    normalizer: observation normaliser factory (gin: @Normalize); None: the
      observations go in as they are.
    head_init_range: the head's kernel starts uniform in [-r, r]; None:
      orthogonal with gain 0.01, a near-uniform initial policy.
  """
  body, normalizer = _build(body, MLP), _build(normalizer, None)
  _check_body_and_normalizer(body, normalizer)
  return PolicyModel(body=body, n_inputs=_n_inputs(policy_distribution),
                     normalizer=normalizer, head_init_range=head_init_range)


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
      emb = nn.Dense(self.dim, kernel_init=HIDDEN_KERNEL_INIT,
                     bias_init=nn.initializers.zeros, name='action_dense')(
                         actions.astype(jnp.float32))
    # emb is [B, *S, L, dim]; line the features up as [B, 1.., L, dim].
    b, l = features.shape[:2]
    if emb.ndim < 3 or emb.shape[0] != b or emb.shape[-2] != l:
      raise ValueError(
          f'Actions of shape {actions.shape} do not match observations with '
          f'batch {b} and slice length {l} (discrete: [B, *S, L]; '
          'continuous: [B, *S, L, action_dim]).')
    x = nn.Dense(self.dim, kernel_init=HIDDEN_KERNEL_INIT,
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


@configurable
def Value(body: Callable[[], nn.Module] | None = None,
          normalizer: Callable[[], nn.Module] | None = None,
          head_init_range: float | None = None,
          inject_actions: bool = False,
          is_discrete: bool = True,
          vocab_size: int = 2,
          inject_actions_dim: int = 64,
          inject_actions_n_layers: int = 1,
          multiplicative_action_injection: bool = False) -> ValueModel:
  """Value network V(s) -> [B, L, 1], or Q(s, a) with `inject_actions`.

  Args:
    body: body factory (gin: @MLP, @AtariCnnBody, @MinAtarCnnBody,
      @TransformerDecoder); None: @MLP.
    normalizer: observation normaliser factory (gin: @Normalize); None: the
      observations go in as they are.
    head_init_range: the head's kernel starts uniform in [-r, r]; None:
      orthogonal with gain 1.
    inject_actions: make Q(s, a): the body's features are combined with the
      action before the head (set by the trainers with q_value on).
    is_discrete: the actions are integers (embedded) rather than vectors (set
      by the trainer from the action space with inject_actions).
    vocab_size: the number of discrete actions the embedding holds (set by
      the trainer with inject_actions).
    inject_actions_dim: width of the action embedding and of the Dense
      layers after the combination.
    inject_actions_n_layers: Dense layers after features and actions are
      combined (with MLP's activation).
    multiplicative_action_injection: combine as LayerNorm(features *
      tanh(action embedding)) instead of their sum.
  """
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
  body, normalizer = _build(body, MLP), _build(normalizer, None)
  _check_body_and_normalizer(body, normalizer)
  return ValueModel(body=body, normalizer=normalizer, action_injector=injector,
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


@configurable(denylist=['policy_distribution'])
def PolicyAndValue(policy_distribution: Any,
                   body: Callable[[], nn.Module] | None = None,
                   normalizer: Callable[[], nn.Module] | None = None,
                   joint: bool = True,
                   head_init_range: float | None = None) -> PolicyAndValueModel:
  """Policy and value heads on one body (joint) or on two separate bodies.

  Args:
    policy_distribution: the action distribution whose inputs the policy
      head outputs (passed by the trainer, not bindable in gin).
    body: body factory (gin: @MLP, @AtariCnnBody, @MinAtarCnnBody,
      @TransformerDecoder); None: @MLP.
    normalizer: observation normaliser factory (gin: @Normalize); None: the
      observations go in as they are.
    joint: True: one body feeds both heads; False: the body factory is
      called twice, one body per head.
    head_init_range: both heads' kernels start uniform in [-r, r]; None:
      orthogonal, gain 0.01 (policy) and 1 (value).
  """
  n_inputs = _n_inputs(policy_distribution)
  norm = _build(normalizer, None)
  first = _build(body, MLP)
  _check_body_and_normalizer(first, norm)
  if joint:
    return PolicyAndValueModel(n_inputs=n_inputs, body=first,
                               normalizer=norm, head_init_range=head_init_range)
  # A second call of the factory: two independent bodies with their own params.
  return PolicyAndValueModel(n_inputs=n_inputs, policy_body=first,
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


@configurable
def Quality(n_actions: int = 2,
            body: Callable[[], nn.Module] | None = None,
            normalizer: Callable[[], nn.Module] | None = None,
            head_init_range: float | None = None) -> QualityModel:
  """Q-network with one output per discrete action.

  Args:
    n_actions: outputs, one per discrete action (DQN passes its env's
      action count).
    body: body factory (gin: @MLP, @AtariCnnBody, @MinAtarCnnBody,
      @TransformerDecoder); None: @MLP.
    normalizer: observation normaliser factory (gin: @Normalize); None: the
      observations go in as they are.
    head_init_range: the head's kernel starts uniform in [-r, r]; None:
      orthogonal with gain 1.
  """
  body, normalizer = _build(body, MLP), _build(normalizer, None)
  _check_body_and_normalizer(body, normalizer)
  return QualityModel(body=body, n_actions=int(n_actions), normalizer=normalizer,
                      head_init_range=head_init_range)
