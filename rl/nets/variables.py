"""A model's variables: initialisation, its top-level layers, and copying
shared layers between models.

`init_variables(model, key, obs)` returns {'params': ...} plus a 'normalizer'
collection when the model has a normaliser. Collection code runs
`model.apply(variables, obs, update_normalizer=True, mutable=['normalizer'])`;
training code runs `model.apply(variables, obs)`.

Weight sharing (`n_shared_layers` of the actor-critic agents) counts
top-level layers the way the reference does for Serial(normalizer, body,
head): see `top_level_layers` and `copy_shared_layers`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import flax.linen as nn
import jax
import jax.numpy as jnp


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
