"""Networks for RL agents: MLP bodies, running observation normalisation, and
the policy / value / policy-and-value / Q-value models built from them.

Shapes. Every model consumes observations shaped [B, L, *obs_shape] (batch of
slices of L timesteps) and returns per-timestep outputs shaped [B, L, ...].

Gin. The linen Module classes below are plain dataclasses; gin is only put on
the *factory functions* (`MLP`, `Normalize`, `Policy`, `Value`,
`PolicyAndValue`, `Quality`). Gin rewriting a dataclass' __init__ interferes
with linen's own dataclass transform and module cloning, whereas a factory is
an ordinary function gin handles well. `body` / `normalizer` arguments are
factories too (gin passes `@MLP`, `@Normalize`), so every call builds a fresh,
unbound module.

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


def _resolve_activation(activation: str | Callable) -> Callable:
  if callable(activation):
    return activation
  if isinstance(activation, str) and activation.lower() in _ACTIVATIONS:
    return _ACTIVATIONS[activation.lower()]
  raise ConfigError(
      f'Unknown activation_fn {activation!r}; use a callable or one of '
      f'{sorted(_ACTIVATIONS)}.')


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
