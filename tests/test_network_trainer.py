"""The network Trainer: learning, state round trips, NaN detection, data parallelism."""
import os
import subprocess
import sys
import textwrap

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from network_helpers import Epochs
from rl.errors import NonFiniteLossError
from rl.learner.fused_epoch import summarize
from rl.learner.fused_epoch import weights_norm
from rl.learner.network_trainer import Trainer
from rl.optim import optimizers

TESTS = os.path.dirname(os.path.abspath(__file__))
W = np.array([[2.0], [-1.0], [0.5]], np.float32)


def regression_data(seed=0, n=256):
  """The epoch's data: inputs x [n, 3]; a batch's targets are x @ W."""
  return jnp.asarray(np.random.default_rng(seed).normal(size=(n, 3)), jnp.float32)


def draw(data, key):
  return jax.random.randint(key, (32,), 0, data.shape[0])


def take(data, index):  # any leading axes: a chunk's steps are gathered at once
  return data[index]


def make(x, key, carry):
  """(inputs, targets); a carry, when given, shifts the targets."""
  del key
  targets = x @ W
  return x, targets if carry is None else targets + carry


def mse(pred, batch):
  """The loss and its metrics, as every loss returns them."""
  error = jnp.mean((pred - batch[1]) ** 2)
  return error, {'mse': error}


def make_trainer(lr=0.05, seed=0, optimizer=optimizers.SGD, **kwargs):
  return Trainer(nn.Dense(1), optimizer, lambda step: lr,
                 example_inputs=(regression_data()[:1],), seed=seed, **kwargs)


def epochs(trainer, after_step=None):
  """The trainer's epochs on the regression batches, with the mse loss."""
  return Epochs(trainer, mse, draw, take, make, after_step)


def test_training_reduces_the_loss_and_counts_steps():
  trainer = make_trainer()
  run = epochs(trainer)
  key = jax.random.PRNGKey(0)
  first, key, _ = run(regression_data(), key, n_steps=1, n_eval_steps=2)
  later, key, _ = run(regression_data(), key, n_steps=200, n_eval_steps=2)
  assert trainer.step == 201
  assert later['mse'] < 1e-3 < first['mse']
  assert set(later) >= {'loss', 'mse', 'learning_rate', 'gradients_l2'}


def test_an_epoch_is_one_fused_call_on_device_drawn_batches():
  """An epoch draws every batch inside the compiled call from (data, key, carry)."""
  seen = []

  def after_step(carry, variables, step):
    del variables
    seen.append(step)  # traced once per compilation
    return carry

  trainer = make_trainer()
  run = epochs(trainer, after_step)
  key = jax.random.PRNGKey(0)
  results, key2, carry = run(regression_data(), key, jnp.float32(3.0), n_steps=300,
                                n_chunks=3, n_eval_steps=2)
  assert trainer.step == 300 and float(carry) == 3.0
  assert not np.array_equal(np.asarray(key), np.asarray(key2))
  assert results['mse'] < 1e-3
  np.testing.assert_allclose(np.asarray(trainer.model_weights['bias']), [3.0], atol=0.05)
  # The same call again reuses the compiled epoch: nothing is traced anew.
  traced = len(seen)
  run(regression_data(), key2, jnp.float32(3.0), n_steps=300, n_chunks=3, n_eval_steps=2)
  assert len(seen) == traced


def test_steps_per_second_is_the_epochs_steps_over_the_seconds_it_trained():
  trainer = make_trainer()
  *_, result = epochs(trainer).raw(regression_data(), jax.random.PRNGKey(0), n_steps=6)
  assert trainer.results(jax.device_get(result), 2.0)['steps_per_second'] == 3.0


def test_state_round_trip_is_exact():
  a = make_trainer()
  key = jax.random.PRNGKey(0)
  _, key, _ = epochs(a)(regression_data(), key, n_steps=5)
  b = make_trainer(seed=1)
  b.load_state_dict(a.state_dict())
  assert b.step == 5
  np.testing.assert_array_equal(a.model_weights['kernel'], b.model_weights['kernel'])
  x = np.asarray(regression_data(3)[:32])
  batch = make(x, None, None)
  assert epochs(a).evaluate(batch) == epochs(b).evaluate(batch)
  # The optimizer state came along too: the next epoch is the same on both.
  after_a, _, _ = epochs(a)(regression_data(), key, n_steps=5)
  after_b, _, _ = epochs(b)(regression_data(), key, n_steps=5)
  assert after_a['loss'] == after_b['loss']
  np.testing.assert_array_equal(a.model_weights['kernel'], b.model_weights['kernel'])


def test_weights_are_settable():
  trainer = make_trainer()
  zeros = {'kernel': np.zeros((3, 1), np.float32), 'bias': np.zeros(1, np.float32)}
  trainer.model_weights = zeros
  x = np.ones((1, 3), np.float32)
  np.testing.assert_array_equal(np.asarray(trainer.model.apply(trainer.variables, x)), [[0.0]])


def test_nan_loss_is_reported_with_its_name():
  trainer = make_trainer(lr=1e30, loss_name='value_loss')
  with pytest.raises(NonFiniteLossError, match="'value_loss' became"):
    epochs(trainer)(regression_data(), jax.random.PRNGKey(0), n_steps=20)


def test_epoch_summary_names_the_first_non_finite_step():
  losses = jnp.array([1.0, 3.0, jnp.nan, jnp.inf])
  norms = jnp.array([2.0, 4.0, 6.0, 8.0])
  result = summarize(losses[:2], norms[:2], {}, 0.1, 7, 1.0)
  assert (int(result.n_steps), float(result.loss), float(result.gradients_l2)) == (2, 2.0, 3.0)
  assert int(result.first_non_finite) == 2  # none: n_steps
  result = summarize(losses, norms, {}, 0.1, 7, 1.0)
  assert int(result.first_non_finite) == 2 and np.isnan(float(result.non_finite_loss))
  result = summarize(losses[1:], norms[1:], {}, 0.1, 7, 1.0)
  assert int(result.first_non_finite) == 1
  empty = summarize(jnp.zeros((0,)), jnp.zeros((0,)), {}, 0.1, 7, 1.0)
  assert int(empty.n_steps) == 0


def test_weights_norm_is_the_global_norm():
  params = {'a': jnp.array([[3.0, 0.0]]), 'b': {'c': jnp.array([4.0])}}
  assert float(weights_norm(params)) == pytest.approx(5.0)
  assert float(weights_norm({})) == 0.0


def test_two_devices_give_the_same_loss_as_one():
  """The same epoch on two (faked CPU) devices: batches sharded, parameters replicated."""
  script = textwrap.dedent(f'''
    import sys
    sys.path.insert(0, {TESTS!r})
    import jax
    from test_network_trainer import epochs, make_trainer, regression_data
    from rl.optim import optimizers
    trainer = make_trainer(lr=1e-2, optimizer=optimizers.Adam)
    m, _, _ = epochs(trainer)(regression_data(), jax.random.PRNGKey(0), n_steps=10,
                              n_eval_steps=1)
    print(jax.local_device_count(), repr(m['loss']), repr(m['mse']))
  ''')
  def run(devices):
    env = dict(os.environ, XLA_FLAGS=f'--xla_force_host_platform_device_count={devices}',
               JAX_PLATFORMS='cpu')
    out = subprocess.run([sys.executable, '-c', script], env=env, capture_output=True,
                         text=True, check=True)
    n, loss, metric = out.stdout.split()
    return int(n), float(loss), float(metric)
  one, two = run(1), run(2)
  assert (one[0], two[0]) == (1, 2)
  np.testing.assert_allclose(one[1:], two[1:], rtol=1e-5)
