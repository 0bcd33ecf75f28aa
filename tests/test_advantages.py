"""Tests for rl.ops.advantages against hand-computed numbers.

The shared example is a batch of two slices (L = 6), gamma = 0.5, lambda = 0.5:
  row 0 TERMINATED: real rows 0..2, terminated at row 2, row 3 holds the final
        observation (mask 0, its value 8 must be ignored), rows 4..5 padding.
  row 1 TRUNCATED:  real rows 0..2, not done, row 3 holds the final observation
        (mask 0, value 10 is the bootstrap), rows 4..5 padding.
Both have rewards [1, 2, 3] and stored MC returns (no bootstrap)
  G2 = 3, G1 = 2 + 0.5 * 3 = 3.5, G0 = 1 + 0.5 * 3.5 = 2.75.
"""

import gin
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from rl.data.trajectories import discounted_returns
from rl.ops import advantages
from rl.ops.advantages import gae, monte_carlo, normalize, td_k, td_lambda

GAMMA = 0.5
LAMBDA = 0.5


def example():
  rewards = np.array([[1, 2, 3, 0, 0, 0], [1, 2, 3, 0, 0, 0]], dtype=np.float32)
  returns = np.array([[2.75, 3.5, 3, 0, 0, 0], [2.75, 3.5, 3, 0, 0, 0]], dtype=np.float32)
  values = np.array([[4, 2, 6, 8, 0, 0], [4, 2, 6, 10, 0, 0]], dtype=np.float32)
  dones = np.array([[0, 0, 1, 0, 0, 0], [0, 0, 0, 0, 0, 0]], dtype=np.float32)
  mask = np.array([[1, 1, 1, 0, 0, 0], [1, 1, 1, 0, 0, 0]], dtype=np.float32)
  return rewards, returns, values, dones, mask


def all_estimators(margin):
  estimators = [monte_carlo(GAMMA, margin), td_lambda(GAMMA, margin, LAMBDA),
                gae(GAMMA, margin, LAMBDA)]
  if margin >= 1:
    estimators.append(td_k(GAMMA, margin))
  return estimators


@pytest.mark.parametrize("margin, shape", [(1, (1, 2)), (2, (1, 1))])
def test_shapes(margin, shape):
  inputs = [np.ones((1, 3), np.float32)] * 4 + [np.array([[1, 1, 0]], np.float32)]
  for estimator in all_estimators(margin):
    assert estimator(*inputs).shape == shape


def test_monte_carlo_by_hand():
  # A = (G - V) * mask:
  #   [2.75 - 4, 3.5 - 2, 3 - 6, (0 - 8) * 0] = [-1.25, 1.5, -3, 0] (both rows: no bootstrap)
  a = monte_carlo(GAMMA, 2)(*example())
  np.testing.assert_allclose(a, [[-1.25, 1.5, -3, 0], [-1.25, 1.5, -3, 0]], atol=1e-6)


def test_td_k_by_hand():
  # k = 2.
  # TERMINATED: t0: 1 + 0.5*2 + 0.25*V2(6) = 3.5         -> 3.5 - 4 = -0.5
  #             t1: 2 + 0.5*3, done at row 2: no bootstrap = 3.5 -> 3.5 - 2 = 1.5
  #             t2: 3, done                           -> 3 - 6 = -3
  # TRUNCATED:  t0: same as above                     -> -0.5
  #             t1: 2 + 0.5*3 + 0.25*V3(10) = 6       -> 6 - 2 = 4
  #             t2: row 3 has mask 0, so J = 1: 3 + 0.5*10 = 8 -> 8 - 6 = 2
  # Row 3 is masked in both.
  a = td_k(GAMMA, 2)(*example())
  np.testing.assert_allclose(a, [[-0.5, 1.5, -3, 0], [-0.5, 4, 2, 0]], atol=1e-6)


def test_td_k_bootstrap_row_by_hand():
  # k = 2, the offset of the one later row whose value each row's target reads:
  # TERMINATED: t0 -> 2 (V2 above); t1, t2 -> 0 (the termination at row 2 comes
  #             first); t3 -> 1 (row 4 is padding: mask 0 cuts the window).
  # TRUNCATED:  t0 -> 2; t1 -> 2 (V3, the final observation); t2 -> 1 (V3);
  #             t3 -> 1.
  _, _, _, dones, mask = example()
  np.testing.assert_array_equal(td_k(GAMMA, 2).bootstrap_row(dones, mask),
                                [[2, 0, 0, 1], [2, 2, 1, 1]])
  np.testing.assert_array_equal(monte_carlo(GAMMA, 2).bootstrap_row(dones, mask),
                                np.zeros((2, 4)))
  assert gae(GAMMA, 2, LAMBDA).bootstrap_row is None


@pytest.mark.parametrize("margin", [1, 2, 4])
@pytest.mark.parametrize("make", [td_k, monte_carlo], ids=["td_k", "monte_carlo"])
def test_only_the_bootstrap_rows_value_counts_bit_for_bit(make, margin):
  # Keeping row t's value and its bootstrap row's, and zeroing every other
  # row, leaves the advantage of row t exactly as it was.
  rng = np.random.default_rng(margin)
  length = margin + 3
  rewards, returns, values = rng.normal(size=(3, 64, length)).astype(np.float32)
  dones = (rng.random((64, length)) < 0.15).astype(np.float32)
  mask = (rng.random((64, length)) < 0.85).astype(np.float32)
  estimator = make(GAMMA, margin)
  full = np.asarray(estimator(rewards, returns, values, dones, mask))
  offsets = np.asarray(estimator.bootstrap_row(dones, mask))
  assert set(np.unique(offsets)) <= set(range(margin + 1))
  for t in range(full.shape[1]):
    kept = np.zeros_like(values)
    kept[:, t] = values[:, t]
    later = offsets[:, t] > 0
    columns = t + offsets[later, t]
    kept[later, columns] = values[later, columns]
    part = np.asarray(estimator(rewards, returns, kept, dones, mask))
    np.testing.assert_array_equal(part[:, t], full[:, t])


def test_td_k_one_step_by_hand():
  # k = 1: A = r + 0.5 (1 - d) V_next - V.
  # TERMINATED: [1 + 1 - 4, 2 + 3 - 2, 3 + 0 - 6, 0, 0] = [-2, 3, -3, 0, 0]
  # TRUNCATED:  [-2, 3, 3 + 5 - 6, 0, 0]               = [-2, 3,  2, 0, 0]
  a = td_k(GAMMA, 1)(*example())
  np.testing.assert_allclose(a, [[-2, 3, -3, 0, 0], [-2, 3, 2, 0, 0]], atol=1e-6)


# G_t = r_t + 0.5 (1 - d_t) [(1 - 0.5 m_{t+1}) V_{t+1} + 0.5 m_{t+1} G_{t+1}]
# TERMINATED: G2 = 3 (done)
#             G1 = 2 + 0.5 (0.5*6 + 0.5*3) = 2 + 2.25 = 4.25
#             G0 = 1 + 0.5 (0.5*2 + 0.5*4.25) = 1 + 1.5625 = 2.5625
#             A = [2.5625 - 4, 4.25 - 2, 3 - 6, 0] = [-1.4375, 2.25, -3, 0]
# TRUNCATED:  G2 = 3 + 0.5 (1 * V3) = 3 + 5 = 8   (m3 = 0: plain bootstrap)
#             G1 = 2 + 0.5 (0.5*6 + 0.5*8) = 5.5
#             G0 = 1 + 0.5 (0.5*2 + 0.5*5.5) = 2.875
#             A = [2.875 - 4, 5.5 - 2, 8 - 6, 0] = [-1.125, 3.5, 2, 0]
# GAE gives the same numbers, via deltas d_t = r_t + 0.5 (1 - d_t) V_{t+1} - V_t:
# TERMINATED: d = [-2, 3, -3]; A2 = -3, A1 = 3 + 0.25*(-3) = 2.25, A0 = -2 + 0.25*2.25 = -1.4375
# TRUNCATED:  d = [-2, 3, 2];  A2 = 2 (m3 = 0), A1 = 3 + 0.25*2 = 3.5, A0 = -2 + 0.25*3.5 = -1.125
LAMBDA_EXPECTED = [[-1.4375, 2.25, -3, 0], [-1.125, 3.5, 2, 0]]


def test_td_lambda_by_hand():
  np.testing.assert_allclose(td_lambda(GAMMA, 2, LAMBDA)(*example()), LAMBDA_EXPECTED, atol=1e-6)


def test_gae_by_hand():
  np.testing.assert_allclose(gae(GAMMA, 2, LAMBDA)(*example()), LAMBDA_EXPECTED, atol=1e-6)


def random_slices(seed, batch=8, length=12):
  """Random slices whose episodes end (terminated or cut) at a random row."""
  rng = np.random.default_rng(seed)
  rewards = rng.normal(size=(batch, length)).astype(np.float32)
  values = rng.normal(size=(batch, length)).astype(np.float32)
  dones = (rng.random((batch, length)) < 0.15).astype(np.float32)
  ends = rng.integers(1, length, size=batch)
  mask = (np.arange(length)[None, :] < ends[:, None]).astype(np.float32)
  returns = rng.normal(size=(batch, length)).astype(np.float32)
  return rewards, returns, values, dones, mask


def test_gae_every_row_by_hand():
  # Two trajectories laid out one after the other, gamma 0.9, lambda 0.5, margin 2:
  #   A: three steps cut by the time limit, then its final observation (mask 0);
  #   B: one step that terminates, then its final observation.
  # A's TD residuals: 1 + 0.9 * 0.4 - 0.5 = 0.86, 1 + 0.9 * 0.3 - 0.4 = 0.87,
  # 1 + 0.9 * 0.2 - 0.3 = 0.88 (the final observation's value bootstraps); the
  # coefficient gamma * lambda = 0.45, and 0 past A's last step. So
  #   A0 = 0.86 + 0.45 * 0.87 = 1.2515, A1 = 0.87 + 0.45 * 0.88 = 1.266,
  #   A2 = 0.88 (its window ends in the final row), final row 0;
  #   B0 = 2 + 0.9 * 0 * 5 - 1 = 1 (terminated: B's final value 5 is ignored).
  rewards = np.array([1, 1, 1, 0, 2, 0], np.float32)
  values = np.array([0.5, 0.4, 0.3, 0.2, 1.0, 5.0], np.float32)
  dones = np.array([0, 0, 0, 0, 1, 0], np.float32)
  mask = np.array([1, 1, 1, 0, 1, 0], np.float32)
  follows = np.array([1, 1, 1, 0, 1, 0], bool)  # row t + 1 is in row t's trajectory
  a = gae(0.9, 2, 0.5).every_row(rewards, values, dones, mask, follows)
  np.testing.assert_allclose(a, [1.2515, 1.266, 0.88, 0, 1, 0], atol=1e-6)


@pytest.mark.parametrize("margin", [0, 1, 2, 3, 5, 16])
def test_gae_every_row_is_the_estimator_on_each_rows_slice(margin):
  """`every_row` gives each row the advantage `gae` gives a slice of margin + 1 rows
  starting there (zeros past its trajectory's end), for any margin, power of two or not."""
  rng = np.random.default_rng(margin)
  lengths = rng.integers(1, 12, size=9)  # steps per trajectory, each + a final row
  rows = int(np.sum(lengths + 1))
  rewards = rng.normal(size=rows).astype(np.float32)
  values = rng.normal(size=rows).astype(np.float32)
  dones = np.zeros(rows, np.float32)
  mask = np.ones(rows, np.float32)
  row_end = np.zeros(rows, np.int64)
  start = 0
  for n in lengths:
    end = start + n + 1
    mask[end - 1] = 0.0
    dones[end - 2] = float(rng.random() < 0.5)  # terminated, else cut
    row_end[start:end] = end
    start = end
  width = margin + 1
  index = np.arange(rows)[:, None] + np.arange(width)[None, :]
  valid = index < row_end[:, None]
  window = [np.where(valid, x[np.minimum(index, rows - 1)], 0.0).astype(np.float32)
            for x in (rewards, rewards, values, dones, mask)]
  estimator = gae(0.97, margin, 0.9)
  expected = np.asarray(estimator(*window))[:, 0]
  follows = np.arange(1, rows + 1) < row_end
  np.testing.assert_allclose(estimator.every_row(rewards, values, dones, mask, follows),
                             expected, atol=1e-5)


@pytest.mark.parametrize("lambda_", [0.0, 0.5, 0.95, 1.0])
def test_gae_equals_td_lambda(lambda_):
  inputs = random_slices(0)
  np.testing.assert_allclose(gae(0.9, 1, lambda_)(*inputs), td_lambda(0.9, 1, lambda_)(*inputs),
                             atol=1e-5)


def test_td_lambda_zero_is_one_step_td():
  inputs = random_slices(1)
  np.testing.assert_allclose(td_lambda(0.9, 1, 0.0)(*inputs), td_k(0.9, 1)(*inputs), atol=1e-5)


def test_td_lambda_one_on_terminated_episode_is_monte_carlo():
  # With lambda = 1 and a terminated episode nothing is bootstrapped, so the
  # lambda-return is the stored Monte-Carlo return.
  rewards, returns, values, dones, mask = example()
  terminated = [x[:1] for x in (rewards, returns, values, dones, mask)]
  np.testing.assert_allclose(td_lambda(GAMMA, 2, 1.0)(*terminated),
                             monte_carlo(GAMMA, 2)(*terminated), atol=1e-6)


def test_gamma_zero_gives_reward_minus_value():
  rewards, _, values, dones, mask = random_slices(2)
  returns = np.stack([discounted_returns(r, d, 0.0) for r, d in zip(rewards, dones)])
  expected = ((rewards - values) * mask)[:, :-1]
  estimators = [monte_carlo(0.0, 1), td_k(0.0, 1), td_lambda(0.0, 1), gae(0.0, 1)]
  for estimator in estimators:
    np.testing.assert_allclose(estimator(rewards, returns, values, dones, mask), expected,
                               atol=1e-6)


def test_padding_contents_do_not_matter():
  # Rows after the final-observation row are padding, and the final
  # observation row's own reward/done never matter either.
  clean = example()
  rewards, returns, values, dones, mask = [x.copy() for x in clean]
  rewards[:, 3:] = 99.0
  dones[:, 3:] = 1.0
  values[:, 4:] = -50.0
  returns[:, 3:] = 7.0
  noisy = (rewards, returns, values, dones, mask)
  for estimator in all_estimators(2):
    np.testing.assert_allclose(estimator(*noisy), estimator(*clean), atol=1e-6)


def test_estimators_do_not_mutate_inputs():
  inputs = example()
  copies = [x.copy() for x in inputs]
  for estimator in all_estimators(2):
    estimator(*inputs)
  for original, copy in zip(inputs, copies):
    np.testing.assert_array_equal(original, copy)


def test_estimators_declare_what_they_need():
  """The trainers' checks read these: margin >= 1 for bootstrapping, whole episodes for
  Monte-Carlo returns."""
  made = [gae(GAMMA, 2, LAMBDA), td_lambda(GAMMA, 2, LAMBDA), td_k(GAMMA, 2), monte_carlo(GAMMA, 0)]
  assert [e.bootstraps for e in made] == [True, True, True, False]
  assert [e.whole_episodes for e in made] == [False, False, False, True]
  assert [e.margin for e in made] == [2, 2, 2, 0]
  assert [e.name for e in made] == ["gae", "td_lambda", "td_k", "monte_carlo"]


def test_margin_must_be_a_whole_number():
  with pytest.raises(ValueError, match="margin"):
    td_k(GAMMA, 1.5)


def test_margin_longer_than_slice_is_rejected():
  with pytest.raises(ValueError, match="exceeds"):
    monte_carlo(GAMMA, 4)(*[np.ones((1, 3))] * 5)


def test_mismatched_shapes_are_rejected():
  inputs = list(example())
  inputs[2] = inputs[2][:, :-1]
  with pytest.raises(ValueError, match="same shape"):
    gae(GAMMA, 1)(*inputs)


def test_estimators_under_jit():
  inputs = [jnp.asarray(x) for x in example()]
  for estimator in all_estimators(2):
    np.testing.assert_allclose(jax.jit(estimator)(*inputs), estimator(*inputs), atol=1e-6)


def test_gin_configurable_lambda():
  try:
    gin.parse_config("td_lambda.lambda_ = 0.0")
    configured = td_lambda(GAMMA, 2)
  finally:
    gin.clear_config()
  inputs = example()
  np.testing.assert_allclose(configured(*inputs), td_k(GAMMA, 1)(*inputs)[:, :-1], atol=1e-6)


def test_discounted_returns_by_hand():
  # gamma = 0.5, done at index 1 restarts the sum:
  #   G2 = 3, G1 = 2 (done), G0 = 1 + 0.5*2 = 2
  np.testing.assert_allclose(discounted_returns([1.0, 2.0, 3.0], [0, 1, 0], 0.5), [2, 2, 3])
  # No dones: G = [1 + 0.5*3.5, 2 + 0.5*3, 3] = [2.75, 3.5, 3]
  np.testing.assert_allclose(
      discounted_returns(np.array([1, 2, 3], np.float32), np.zeros(3, bool), 0.5),
      [2.75, 3.5, 3])


def test_normalize_ignores_masked_entries():
  # Real entries [1, 3]: mean 2, std 1 -> [-1, 1]; the padded 100 is ignored and zeroed.
  out = normalize(np.array([[1.0, 3.0, 100.0]]), np.array([[1, 1, 0]]))
  np.testing.assert_allclose(out, [[-1.0, 1.0, 0.0]], atol=1e-6)
  np.testing.assert_allclose(jax.jit(normalize)(jnp.ones(3), jnp.zeros(3)), np.zeros(3))


def test_module_exports():
  for name in ("monte_carlo", "td_k", "td_lambda", "gae", "normalize", "masked_mean"):
    assert callable(getattr(advantages, name))
