"""rl: a gin-configured reinforcement-learning experiment runner on JAX."""
