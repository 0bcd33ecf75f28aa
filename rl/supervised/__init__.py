"""Supervised training machinery the RL trainers are built on."""
