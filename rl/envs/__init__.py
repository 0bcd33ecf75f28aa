"""Environments: the RLTask factory, the gymnasium and gymnax backends, env ids and wrappers."""
