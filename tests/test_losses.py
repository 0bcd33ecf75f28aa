"""Losses against hand-computed examples."""
import numpy as np
import pytest

from rl.trainers import losses


def test_masked_mean_ignores_padding():
  x = np.array([[1.0, 3.0, 100.0]])
  mask = np.array([[1.0, 1.0, 0.0]])
  assert float(losses.masked_mean(x, mask)) == pytest.approx(2.0)
  assert float(losses.masked_mean(x, np.zeros_like(mask))) == 0.0


def test_reinforce_loss_by_hand():
  # Real steps: returns 1 and 3 -> mean 2, std 1 -> weights -1, +1.
  # log-probs -0.5 and -0.1: loss = -((-0.5)(-1) + (-0.1)(+1)) / 2 = -0.2.
  log_probs = np.array([[-0.5, -0.1, -7.0]])
  returns = np.array([[1.0, 3.0, 50.0]])
  mask = np.array([[1.0, 1.0, 0.0]])
  assert float(losses.reinforce_loss(log_probs, returns, mask)) == pytest.approx(-0.2, abs=1e-6)


def test_reinforce_gradient_raises_probability_of_good_actions():
  import jax
  returns = np.array([[1.0, 3.0]])
  mask = np.ones((1, 2))
  grad = jax.grad(lambda lp: losses.reinforce_loss(lp, returns, mask))(np.zeros((1, 2)))
  # Descending the loss raises the log-prob of the better-than-average step.
  assert grad[0, 1] < 0 < grad[0, 0]
