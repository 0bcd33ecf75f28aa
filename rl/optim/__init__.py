"""Optimizers (optax) and learning-rate schedules, configurable through gin."""
