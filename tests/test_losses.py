"""Losses against hand-computed examples."""
import numpy as np
import pytest

from rl.algorithms import actor_critic
from rl.algorithms import batches
from rl.algorithms import ppo
from rl.ops import losses
from rl.ops.advantages import masked_mean
from rl.ops.advantages import masked_means


def test_masked_mean_ignores_padding():
  x = np.array([[1.0, 3.0, 100.0]])
  mask = np.array([[1.0, 1.0, 0.0]])
  assert float(masked_mean(x, mask)) == pytest.approx(2.0)
  assert float(masked_mean(x, np.zeros_like(mask))) == 0.0


def test_masked_means_are_masked_means_in_one_reduction():
  # Real steps (mask 1): x 1 and 3 -> 2; y 4 and -2 -> 1; the padding's inf stays out.
  mask = np.array([[1.0, 1.0, 0.0]])
  means = masked_means(mask, x=np.array([[1.0, 3.0, 100.0]]),
                       y=np.array([[4.0, -2.0, np.inf]]))
  assert list(means) == ['x', 'y']
  assert float(means['x']) == pytest.approx(2.0)
  assert float(means['y']) == pytest.approx(1.0)
  assert float(masked_means(np.zeros_like(mask), x=np.ones((1, 3)))['x']) == 0.0
  assert masked_means(mask) == {}


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


def test_value_loss_by_hand():
  values = np.array([[[1.0], [2.0], [9.0]]])
  batch = batches.ValueBatch(observation=None, action=None, target=np.array([[0.0, 4.0, 0.0]]),
                             mask=np.array([[1.0, 1.0, 0.0]]))
  loss, metrics = actor_critic.value_loss(values, batch, 10.0)
  # (1 + 4) / 2 real steps; value_mean is the real steps' (1 + 2) / 2 in return units.
  assert float(loss) == pytest.approx(2.5)
  assert float(metrics['value_loss']) == pytest.approx(2.5)
  assert float(metrics['value_mean']) == pytest.approx(15.0)


def test_a2c_loss_by_hand():
  log_probs = np.array([[-1.0, -2.0]])
  advantages = np.array([[2.0, -1.0]])
  entropy = np.array([[0.5, 0.7]])
  mask = np.ones((1, 2))
  # -((-1)(2) + (-2)(-1)) / 2 - 0.1 * 0.6 = 0 - 0.06.
  assert float(losses.a2c_loss(log_probs, advantages, entropy, mask, 0.1)) == pytest.approx(
      -0.06, abs=1e-6)


def test_ppo_loss_clips_by_hand():
  # Step 1: ratio e^0.5 = 1.6487 > 1.2, A = 1 -> clipped to 1.2.
  # Step 2: ratio e^-0.5 = 0.6065 < 0.8, A = -2 -> min(-1.2131, -1.6) = -1.6.
  # Step 3 is padding.
  log_probs = np.array([[0.0, -0.5, 3.0]])
  old = np.array([[-0.5, 0.0, 0.0]])
  advantages = np.array([[1.0, -2.0, 5.0]])
  mask = np.array([[1.0, 1.0, 0.0]])
  entropy = np.zeros((1, 3))
  loss = ppo.ppo_loss(log_probs, old, advantages, entropy, mask, 0.2, 0.0)
  assert float(loss) == pytest.approx(-(1.2 - 1.6) / 2, abs=1e-5)
  diag = ppo.ppo_diagnostics(log_probs, old, mask, 0.2)
  assert float(diag['clip_fraction']) == pytest.approx(1.0)
  # KL estimate: ((e^.5 - 1) - .5 + (e^-.5 - 1) + .5) / 2.
  expected = ((np.exp(0.5) - 1 - 0.5) + (np.exp(-0.5) - 1 + 0.5)) / 2
  assert float(diag['approximate_kl_divergence']) == pytest.approx(expected, rel=1e-5)


def test_awr_weights_and_loss_by_hand():
  advantages = np.array([[0.0, 1.0, 10.0]])
  mask = np.array([[1.0, 1.0, 0.0]])
  weights = losses.awr_weights(advantages, mask, beta=1.0, w_max=20.0)
  np.testing.assert_allclose(weights, [[1.0, np.e, 20.0]], rtol=1e-6)
  log_probs = np.array([[-1.0, -2.0, -3.0]])
  # -((-1)(1) + (-2)(e)) / 2.
  assert float(losses.awr_loss(log_probs, weights, mask)) == pytest.approx(
      (1 + 2 * np.e) / 2, rel=1e-6)


def test_awr_threshold_weights():
  advantages = np.array([1.0, 2.0, 3.0, 4.0, 5.0])
  # 60th percentile of 1..5 is 3.4: steps 4 and 5 get weight 1; the 90th
  # (4.6) adds 4 to step 5; minimum 0 does not bind.
  weights = losses.awr_weights(advantages, np.ones(5), 1.0, 20.0,
                               thresholds=((60, 1, 0), (90, 4, 0)))
  np.testing.assert_allclose(weights, [0, 0, 0, 1, 5])


def test_awr_threshold_percentiles_ignore_padding():
  # The same five real steps as above, then three padded rows holding large
  # advantages: with them in the percentile the 60th would be 5 and step 4
  # would lose its weight. Padding must not move the cut.
  advantages = np.array([[1.0, 2.0, 3.0, 4.0, 5.0, 50.0, 50.0, 50.0]])
  mask = np.array([[1.0, 1.0, 1.0, 1.0, 1.0, 0.0, 0.0, 0.0]])
  weights = losses.awr_weights(advantages, mask, 1.0, 20.0,
                               thresholds=((60, 1, 0), (90, 4, 0)))
  np.testing.assert_allclose(weights[0, :5], [0, 0, 0, 1, 5])
  np.testing.assert_allclose(weights[0, 5:], 0)  # padding gets no weight either


def test_advantage_norm_and_explained_variance_by_hand():
  mask = np.array([[1.0, 1.0, 1.0, 0.0]])
  adv = np.array([[3.0, 0.0, -4.0, 100.0]])
  assert float(losses.advantage_norm(adv, mask)) == pytest.approx(5.0)  # sqrt(9 + 16)
  targets = np.array([[1.0, 2.0, 3.0, 50.0]])
  # Var(targets) = 2/3; residuals (0, 0, 1) have variance 2/9 -> 1 - (2/9)/(2/3) = 2/3.
  values = np.array([[1.0, 2.0, 2.0, 0.0]])
  assert float(losses.explained_variance(targets, values, mask)) == pytest.approx(2 / 3, rel=1e-6)
  assert float(losses.explained_variance(targets, targets, mask)) == pytest.approx(1.0)
