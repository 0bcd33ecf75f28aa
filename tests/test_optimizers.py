"""Tests for rl.optim.optimizers against hand-computed updates."""

import gin
import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from rl.optim.lr_schedules import multifactor
from rl.optim.optimizers import SGD, Adam, RMSProp


@pytest.fixture(autouse=True)
def _clean_gin():
  # The builders are gin-configurable; keep one test's bindings out of the
  # next test's defaults.
  gin.clear_config()
  yield
  gin.clear_config()


def _steps(optimizer, params, grads_seq):
  """Applies the optimizer to each gradient in turn; returns all params."""
  state = optimizer.init(params)
  history = []
  for grads in grads_seq:
    updates, state = optimizer.update(grads, state, params)
    params = optax.apply_updates(params, updates)
    history.append(np.asarray(params, dtype=np.float64))
  return history


# optax computes Adam's bias correction 1 - b2**t in float32, where
# 1 - 0.999 is off by ~1.3e-5 relative; that shows up as ~7e-6 relative in
# the step size, so comparisons with the float64 reference allow for it.
ADAM_RTOL = 5e-5


def _reference_adam(w, grads_seq, lr, wd, b1, b2, eps, clip=None):
  """The reference's Adam, written out in float64 numpy (0-based step t)."""
  w = np.asarray(w, np.float64)
  m = np.zeros_like(w)
  v = np.zeros_like(w)
  history = []
  for t, g in enumerate(grads_seq):
    g = np.asarray(g, np.float64)
    if clip is not None and np.linalg.norm(g) >= clip:
      g = g * clip / np.linalg.norm(g)
    m = (1 - b1) * g + b1 * m
    v = (1 - b2) * g**2 + b2 * v
    m_hat = m / (1 - b1 ** (t + 1))
    v_hat = v / (1 - b2 ** (t + 1))
    rate = lr(t) if callable(lr) else lr
    w = (1 - wd) * w - rate * m_hat / (np.sqrt(v_hat) + eps)
    history.append(w)
  return history


def test_adam_one_step_by_hand():
  w = jnp.array([1.0, -2.0, 0.5])
  g = jnp.array([0.1, -0.2, 0.0])
  lr, wd = 0.1, 0.01
  (new_w,) = _steps(Adam(learning_rate=lr, weight_decay_rate=wd), w, [g])
  # First step: m_hat = g and v_hat = g**2, so the Adam direction is
  # g / (|g| + eps) with the reference's eps = 1e-5.
  expected = np.array([
      (1 - wd) * 1.0 - lr * 0.1 / (0.1 + 1e-5),
      (1 - wd) * -2.0 - lr * -0.2 / (0.2 + 1e-5),
      (1 - wd) * 0.5 - lr * 0.0,
  ])
  np.testing.assert_allclose(new_w, expected, rtol=1e-6)


def test_adam_several_steps_match_reference_formula():
  w = np.array([1.0, -2.0, 0.5, 3.0])
  grads_seq = [np.array([0.3, -0.1, 0.02, 1.0]),
               np.array([-0.2, 0.4, 0.0, 0.5]),
               np.array([0.05, 0.05, -0.3, -1.0])]
  optimizer = Adam(learning_rate=0.05, weight_decay_rate=0.001)
  got = _steps(optimizer, jnp.asarray(w, jnp.float32),
               [jnp.asarray(g, jnp.float32) for g in grads_seq])
  want = _reference_adam(w, grads_seq, lr=0.05, wd=0.001, b1=0.9, b2=0.999,
                         eps=1e-5)
  for got_w, want_w in zip(got, want):
    np.testing.assert_allclose(got_w, want_w, rtol=ADAM_RTOL)


def test_adam_eps_is_added_outside_the_square_root():
  # For a gradient of 1e-6 the first step is lr * 1e-6 / (1e-6 + 1e-5) =
  # lr / 11; with eps inside the root it would be about lr * 3e-4.
  (new_w,) = _steps(Adam(learning_rate=1.0, weight_decay_rate=0.0),
                    jnp.zeros(1), [jnp.full(1, 1e-6)])
  np.testing.assert_allclose(new_w, [-1.0 / 11.0], rtol=ADAM_RTOL)


@pytest.mark.parametrize('lr', [1e-4, 1.0])
def test_adam_weight_decay_does_not_scale_with_learning_rate(lr):
  # With zero gradients only the decay acts, and it removes exactly
  # weight_decay_rate of each weight whatever the learning rate.
  w = jnp.array([2.0, -4.0])
  (new_w,) = _steps(Adam(learning_rate=lr, weight_decay_rate=0.1), w,
                    [jnp.zeros(2)])
  np.testing.assert_allclose(new_w, [1.8, -3.6], rtol=1e-6)


def test_adam_weight_decay_acts_even_when_scheduled_lr_is_zero():
  # linear_warmup gives lr 0 on the first update; the decay still applies.
  schedule = multifactor(factors='constant * linear_warmup', constant=1.0,
                         warmup_steps=10)
  (new_w,) = _steps(Adam(learning_rate=schedule, weight_decay_rate=0.5),
                    jnp.array([4.0]), [jnp.array([1.0])])
  np.testing.assert_allclose(new_w, [2.0], rtol=1e-6)


def test_adam_without_weight_decay_needs_no_params():
  optimizer = Adam(learning_rate=0.1, weight_decay_rate=0.0)
  state = optimizer.init(jnp.zeros(2))
  updates, _ = optimizer.update(jnp.array([1.0, -1.0]), state)
  np.testing.assert_allclose(updates, [-0.1 / (1 + 1e-5), 0.1 / (1 + 1e-5)],
                             rtol=ADAM_RTOL)


def test_adam_with_clipping_matches_reference_over_two_steps():
  # Adam's first step is invariant to gradient scale, so clipping only shows
  # from the second step, where the two moments mix differently scaled g.
  w = np.array([0.5, -0.5])
  grads_seq = [np.array([30.0, 40.0]), np.array([0.3, 0.1])]
  optimizer = Adam(learning_rate=0.1, weight_decay_rate=0.0,
                   clip_grad_norm=1.0)
  got = _steps(optimizer, jnp.asarray(w, jnp.float32),
               [jnp.asarray(g, jnp.float32) for g in grads_seq])
  want = _reference_adam(w, grads_seq, lr=0.1, wd=0.0, b1=0.9, b2=0.999,
                         eps=1e-5, clip=1.0)
  np.testing.assert_allclose(got[1], want[1], rtol=ADAM_RTOL)


def test_global_norm_clipping_scales_large_gradient_to_clip_norm():
  params = {'a': jnp.zeros(2), 'b': jnp.zeros(1)}
  # Global norm over both leaves: sqrt(3^2 + 4^2 + 12^2) = 13.
  grads = {'a': jnp.array([3.0, 4.0]), 'b': jnp.array([12.0])}
  optimizer = SGD(learning_rate=1.0, clip_grad_norm=2.6)
  updates, _ = optimizer.update(grads, optimizer.init(params), params)
  np.testing.assert_allclose(updates['a'], [-0.6, -0.8], rtol=1e-6)
  np.testing.assert_allclose(updates['b'], [-2.4], rtol=1e-6)
  assert float(optax.tree.norm(updates)) == pytest.approx(2.6, rel=1e-6)


def test_global_norm_clipping_leaves_small_gradient_alone():
  optimizer = SGD(learning_rate=1.0, clip_grad_norm=10.0)
  params = jnp.zeros(2)
  updates, _ = optimizer.update(jnp.array([3.0, 4.0]), optimizer.init(params))
  np.testing.assert_allclose(updates, [-3.0, -4.0], rtol=1e-6)


@pytest.mark.parametrize('clip', [0.0, -1.0])
def test_non_positive_clip_norm_is_rejected(clip):
  with pytest.raises(ValueError, match='clip_grad_norm'):
    Adam(clip_grad_norm=clip)


def test_rmsprop_one_step_by_hand():
  # The average of squared gradients starts at 1:
  # avg = 0.9 * 1 + 0.1 * g**2, w <- w - lr * g / (sqrt(avg) + eps).
  lr, eps = 0.01, 1e-8
  g = np.array([2.0, -0.5])
  (new_w,) = _steps(RMSProp(learning_rate=lr), jnp.array([1.0, 1.0]),
                    [jnp.asarray(g, jnp.float32)])
  avg = 0.9 + 0.1 * g**2
  expected = 1.0 - lr * g / (np.sqrt(avg) + eps)
  np.testing.assert_allclose(new_w, expected, rtol=1e-6)


def test_rmsprop_gamma_and_clipping():
  # Clip [3, 4] (norm 5) to norm 1 -> [0.6, 0.8], then gamma = 0.5.
  optimizer = RMSProp(learning_rate=0.1, gamma=0.5, clip_grad_norm=1.0)
  (new_w,) = _steps(optimizer, jnp.zeros(2), [jnp.array([3.0, 4.0])])
  g = np.array([0.6, 0.8])
  expected = -0.1 * g / (np.sqrt(0.5 + 0.5 * g**2) + 1e-8)
  np.testing.assert_allclose(new_w, expected, rtol=1e-6)


def test_sgd_one_step_by_hand():
  (new_w,) = _steps(SGD(learning_rate=0.5), jnp.array([1.0, 2.0]),
                    [jnp.array([0.2, -0.4])])
  np.testing.assert_allclose(new_w, [0.9, 2.2], rtol=1e-6)


def test_sgd_momentum_and_nesterov_by_hand():
  grads_seq = [jnp.array([1.0]), jnp.array([1.0])]
  # v1 = 1, v2 = 0.9 * 1 + 1 = 1.9; plain steps by v, Nesterov by g + 0.9 v.
  plain = _steps(SGD(learning_rate=0.1, momentum=0.9), jnp.zeros(1),
                 grads_seq)
  np.testing.assert_allclose([w[0] for w in plain], [-0.1, -0.29], rtol=1e-6)
  nesterov = _steps(SGD(learning_rate=0.1, momentum=0.9, nesterov=True),
                    jnp.zeros(1), grads_seq)
  np.testing.assert_allclose([w[0] for w in nesterov], [-0.19, -0.19 - 0.271],
                             rtol=1e-6)


@pytest.mark.parametrize('build', [
    lambda lr: SGD(learning_rate=lr),
    lambda lr: RMSProp(learning_rate=lr, gamma=1.0),
])
def test_schedule_is_evaluated_at_zero_based_update_count(build):
  # lr(count) = 0.1 * (count + 1): the first update must use 0.1, the second
  # 0.2. gamma = 1 keeps RMSProp's average at its initial 1 so its update is
  # -lr * g / (1 + eps).
  seen = []

  def schedule(count):
    seen.append(count)
    return 0.1 * (count + 1)

  optimizer = build(schedule)
  state = optimizer.init(jnp.zeros(1))
  first, state = optimizer.update(jnp.ones(1), state, jnp.zeros(1))
  second, state = optimizer.update(jnp.ones(1), state, jnp.zeros(1))
  np.testing.assert_allclose([first[0], second[0]], [-0.1, -0.2], rtol=1e-6)
  assert [int(c) for c in seen] == [0, 1]


def test_multifactor_schedule_as_learning_rate_under_jit():
  schedule = multifactor(factors='constant * linear_warmup', constant=1.0,
                         warmup_steps=4)
  optimizer = SGD(learning_rate=schedule)
  update = jax.jit(optimizer.update)
  params = jnp.zeros(1)
  state = optimizer.init(params)
  rates = []
  for _ in range(6):
    updates, state = update(jnp.ones(1), state, params)
    rates.append(-float(updates[0]))
  # The first update has lr 0 (step 0 of the warmup), as in the reference.
  np.testing.assert_allclose(rates, [0.0, 0.25, 0.5, 0.75, 1.0, 1.0],
                             rtol=1e-6)


@gin.configurable
def _optimizer_consumer(optimizer=None):
  """Stands in for a trainer that receives an optimizer builder from gin."""
  return optimizer


def test_gin_configures_optimizer_by_name():
  gin.parse_config("""
      _optimizer_consumer.optimizer = @Adam
      Adam.clip_grad_norm = 1.0
      Adam.weight_decay_rate = 0.0
  """)
  builder = _optimizer_consumer()
  # The trainer passes the learning rate; everything else comes from gin.
  optimizer = builder(learning_rate=1.0)
  w = np.array([0.5, -0.5])
  grads_seq = [np.array([30.0, 40.0]), np.array([0.3, 0.1])]
  got = _steps(optimizer, jnp.asarray(w, jnp.float32),
               [jnp.asarray(g, jnp.float32) for g in grads_seq])
  want = _reference_adam(w, grads_seq, lr=1.0, wd=0.0, b1=0.9, b2=0.999,
                         eps=1e-5, clip=1.0)
  np.testing.assert_allclose(got[1], want[1], rtol=ADAM_RTOL)
