"""Resolving the names gin binds (activations, initialisers) to callables."""

from __future__ import annotations

from collections.abc import Callable

from rl.errors import ConfigError


def by_name(value: str | Callable, table: dict, parameter: str) -> Callable:
  """`value` if it is callable, else its entry in `table` (case-insensitive).

  Raises ConfigError naming `parameter` and the accepted names otherwise.
  """
  if callable(value):
    return value
  if isinstance(value, str) and value.lower() in table:
    return table[value.lower()]
  raise ConfigError(f'Unknown {parameter} {value!r}; use a callable or one of {sorted(table)}.')
