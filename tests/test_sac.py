"""SAC (rl/algorithms/sac.py): its losses by hand, its step against jax.grad, its configs.

The tanh-squashed Gaussian's log-density and each loss are checked on
examples worked out in the comments; one gradient step of the three networks
against the same step written with jax.grad; both shipped configs for two
epochs, the second resumed from the first's checkpoint, against the same two
epochs in one go; the settings SAC refuses, in one line; and, marked slow,
learning Pendulum.
"""
import math
import os

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from rl.algorithms import off_policy
from rl.algorithms import sac
from rl.envs.task import RLTask
from rl.learner.fused_epoch import variables_of
from rl.ops import advantages
from rl.ops.distributions import TanhGaussian
from rl.optim import optimizers
from off_policy_helpers import TwinLinearCritic
from off_policy_helpers import assert_learns_pendulum
from off_policy_helpers import assert_refused_in_one_line
from off_policy_helpers import assert_trees_close
from off_policy_helpers import batch_of
from off_policy_helpers import moved_toward
from off_policy_helpers import pendulum_transitions
from off_policy_helpers import sgd_step
from off_policy_helpers import twin_critic_mse
from off_policy_helpers import two_epochs_resumed_and_in_one_go
from run_helpers import ROOT

CONFIG = os.path.join(ROOT, 'configs', 'sac_pendulum.gin')
JAX_CONFIG = os.path.join(ROOT, 'configs', 'sac_pendulum_jax.gin')
BOX = TanhGaussian((1,), -2.0, 2.0)  # Pendulum's torque box: centre 0, half-width 2
# log pi of the action 0 (u = 0) at mean 0 and raw log-std 0 (log-std -5 + 7 / 2 = -1.5):
# log N(0; 0, e^-1.5) - log(2 (1 - tanh(0)^2)) = 1.5 - 0.9189385 - 0.6931472 = -0.1120857.
LOG_PI_AT_ZERO = -0.1120857


def test_tanh_gaussian_log_prob_by_hand():
  # mean 0.5, raw log-std 0 -> log-std -1.5; normal 0.4: u = 0.5 + e^-1.5 * 0.4 = 0.5892521,
  # a = 2 tanh(u) = 1.0587149; log pi = -0.4^2 / 2 + 1.5 - 0.9189385 - log(2 (1 - tanh(u)^2))
  # = 0.1367230.
  actions, log_probs = BOX.sample_with_log_prob(np.array([[0.5, 0.0]]), np.array([[0.4]]))
  assert float(actions[0, 0]) == pytest.approx(1.0587149, abs=1e-6)
  assert float(log_probs[0]) == pytest.approx(0.1367230, abs=1e-5)


def test_tanh_gaussian_density_integrates_to_one_over_the_box():
  # The density of a, exp(log pi(a)), from the draws that give a grid of actions over (-2, 2).
  mean, raw = 0.3, -0.4
  inputs = np.array([[mean, raw]], np.float32)
  log_std = -5 + 7 * (math.tanh(raw) + 1) / 2
  grid = np.linspace(-2, 2, 200_001)[1:-1]
  normal = (np.arctanh(grid / 2) - mean) / math.exp(log_std)
  actions, log_probs = BOX.sample_with_log_prob(np.repeat(inputs, grid.size, 0), normal[:, None])
  np.testing.assert_allclose(np.asarray(actions)[:, 0], grid, atol=1e-5)
  assert float(np.sum(np.exp(log_probs)) * (grid[1] - grid[0])) == pytest.approx(1.0, abs=1e-3)


def test_tanh_gaussian_acts_in_the_box_greedily_by_sampling_and_uniformly():
  inputs = np.array([[3.0, 0.0], [-0.2, 0.0]], np.float32)
  np.testing.assert_allclose(BOX.sample(inputs, None, 0.0), 2 * np.tanh(inputs[:, :1]),
                             rtol=1e-6)
  key = jax.random.PRNGKey(0)
  sampled = BOX.sample(inputs, key, 1.0)
  assert np.array_equal(sampled, BOX.sample_given(inputs, BOX.noise(key, (2,)), 1.0))
  assert not np.allclose(sampled, 2 * np.tanh(inputs[:, :1]))
  # With `uniform` 1 the actions are uniform over the box, whatever the policy.
  wide = BOX.sample(np.repeat(inputs[:1], 4000, 0), key, 1.0, np.float32(1))
  assert -2 <= float(wide.min()) < -1.9 and 1.9 < float(wide.max()) <= 2
  assert float(np.mean(wide)) == pytest.approx(0.0, abs=0.1)


class LinearActor:
  """Policy inputs (mean m * s, raw log-std 0) of a 1-d observation s."""

  def apply(self, variables, obs):
    mean = variables['params']['m'] * obs
    return jnp.concatenate([mean, jnp.zeros_like(mean)], axis=-1)


def test_soft_td_targets_by_hand():
  # a' = 0 (mean 0, noise 0), log pi(a') = -0.1120857. s' = 1: min(2 * 1, 3 * 1) = 2;
  # V = 2 - 0.5 * log pi = 2.0560429; y = 1 + 0.9 * 2.0560429 = 2.8504386. The second
  # slice's first row terminates: y = r = 0.5.
  batch = batch_of([[0.0, 1.0], [0.0, -1.0]], np.zeros((2, 2)), [[1.0, 0.0], [0.5, 0.0]],
                   [[0.0, 0.0], [1.0, 0.0]], np.ones((2, 2)))
  y = sac.soft_td_targets(BOX, LinearActor(), TwinLinearCritic(), {'params': {'m': 0.0}},
                          {'w': jnp.array([2.0, 3.0])}, batch, 0.5, np.zeros((2, 1, 1)),
                          advantages.td_k(gamma=0.9, margin=1))
  np.testing.assert_allclose(y, [[2.8504386], [0.5]], rtol=1e-6)


def test_twin_critic_loss_by_hand():
  # First rows s = 0.5 and 1, a = 1 and -1: Q1 = 2 s + a = 2 and 1, Q2 = 3 s + a = 2.5 and 2.
  # The second slice is padding; the first's errors against y = 1: 1^2 + 1.5^2 = 3.25.
  batch = batch_of([[0.5, 0.0], [1.0, 0.0]], [[1.0, 0.0], [-1.0, 0.0]], np.zeros((2, 2)),
                   np.zeros((2, 2)), [[1.0, 1.0], [0.0, 0.0]])
  loss, metrics = off_policy.twin_critic_loss(
      TwinLinearCritic(), {'params': {'w': jnp.array([2.0, 3.0])}}, batch, np.array([[1.0], [2.0]]))
  assert float(loss) == pytest.approx(3.25)
  assert float(metrics['q_mean']) == pytest.approx(2.25)  # (2 + 2.5) / 2


def test_actor_loss_by_hand():
  # a = 0 (noise 0), log pi = -0.1120857; min(2 s, 3 s) = 1 and 2 at s = 0.5 and 1:
  # mean(0.5 * -0.1120857 - (1, 2)) = -1.5560429; the entropy estimate is 0.1120857.
  batch = batch_of([[0.5, 0.0], [1.0, 0.0]], np.zeros((2, 2)), np.zeros((2, 2)),
                   np.zeros((2, 2)), np.ones((2, 2)))
  loss, metrics = sac.actor_loss(BOX, LinearActor(), TwinLinearCritic(),
                                 {'params': {'m': 0.0}}, {'params': {'w': jnp.array([2.0, 3.0])}},
                                 batch, 0.5, np.zeros((2, 1, 1)))
  assert float(loss) == pytest.approx(0.5 * LOG_PI_AT_ZERO - 1.5, abs=1e-6)
  assert float(metrics['entropy']) == pytest.approx(-LOG_PI_AT_ZERO, abs=1e-6)


def test_temperature_loss_by_hand():
  # log 0.5 * (0.2 - (-1)) = -0.6931472 * 1.2 = -0.8317766; its gradient, 1.2 > 0, lowers
  # alpha while the entropy is above its target.
  variables = {'params': {'log_alpha': jnp.log(0.5)}}
  loss, metrics = sac.temperature_loss(variables, 0.2, -1.0)
  assert float(loss) == pytest.approx(-0.8317766, abs=1e-6)
  assert float(metrics['alpha']) == pytest.approx(0.5)
  grad = jax.grad(lambda v: sac.temperature_loss(v, 0.2, -1.0)[0])(variables)
  assert float(grad['params']['log_alpha']) == pytest.approx(1.2)


def test_epochs_before_learning_starts_act_uniformly_and_greedy_evaluation_never_does():
  task = RLTask(env='Pendulum-v1', n_envs=2, seed=0)
  trainer = sac.SAC(task, hidden=(8,), n_interactions_per_epoch=200, learning_starts=300)
  # Epoch 1 starts at 0 env steps and epoch 2 at 200, both before 300; epoch 3 at 400.
  assert [float(trainer.sampling_args(1.0, epoch)[0]) for epoch in (1, 2, 3, 4)] == [1, 1, 0, 0]
  assert float(trainer.sampling_args(0.0, 1)[0]) == 0


GAMMA, LR, TAU = 0.9, 0.05, 0.1


def test_a_step_trains_critics_actor_and_temperature_as_jax_grad_does():
  task = RLTask(env='Pendulum-v1', n_envs=2, gamma=GAMMA, seed=0)
  sgd = lambda: optimizers.SGD  # noqa: E731  (a factory of the optimizer factory)
  schedule = lambda: (lambda step: LR)  # noqa: E731
  trainer = sac.SAC(task, hidden=(16,), actor_optimizer=sgd(), actor_lr_schedule=schedule,
                    critic_optimizer=sgd(), critic_lr_schedule=schedule, alpha_optimizer=sgd(),
                    alpha_lr_schedule=schedule, initial_alpha=0.3, tau=TAU,
                    n_interactions_per_epoch=2, batch_size=2, n_replay_epochs=2)
  state = trainer.learner.train_state
  # Targets unlike the critics, so that the TD targets and the Polyak step are seen.
  targets = jax.tree_util.tree_map(lambda p: p * 0.5, state.extra['targets'])
  rows, key = pendulum_transitions(), jax.random.PRNGKey(3)
  (nets, new_targets), steps = jax.jit(trainer.train_step)((state.nets, targets), rows, key)

  actor, critic, dist = trainer.actor_net.model, trainer.critic_net.model, trainer.dist
  alpha = 0.3

  # The same step written with jax.grad, jitted: one compile, where op by op each op compiles.
  @jax.jit
  def by_hand(actor_params, critic_params, targets, rows, key):
    obs, action = rows['observation'], rows['action']
    next_key, actor_key = jax.random.split(key)
    next_noise, noise = (jax.random.normal(k, (8, 1, 1)) for k in (next_key, actor_key))
    # y = r + gamma (min_i Q'_i(s', a') - alpha log pi(a'|s')) where the first row goes on.
    next_a, next_log_pi = dist.sample_with_log_prob(
        actor.apply({'params': actor_params}, obs[:, 1:]), next_noise)
    next_q = jnp.min(critic.apply({'params': targets['critic']}, obs[:, 1:], next_a), axis=0)
    y = (rows['reward'][:, 0]
         + GAMMA * (1 - rows['done'][:, 0]) * (next_q - alpha * next_log_pi)[:, 0])

    critic_loss = twin_critic_mse(critic, obs, action, y)
    new_critic = sgd_step(critic_loss, critic_params, LR)

    def actor_loss(params):
      a, log_pi = dist.sample_with_log_prob(actor.apply({'params': params}, obs[:, :1]), noise)
      q = jnp.min(critic.apply({'params': new_critic}, obs[:, :1], a), axis=0)
      return jnp.mean(alpha * log_pi - q), -jnp.mean(log_pi)
    (actor_value, entropy), actor_grads = jax.value_and_grad(actor_loss, has_aux=True)(
        actor_params)
    new_actor = jax.tree_util.tree_map(lambda p, g: p - LR * g, actor_params, actor_grads)
    # d/d log alpha of log alpha (H - H_target) is H - H_target; H_target = -1 (1 action dim).
    new_log_alpha = math.log(alpha) - LR * (entropy + 1.0)
    return new_critic, new_actor, new_log_alpha, critic_loss(critic_params), actor_value

  critic_params = state.nets['critic']['params']
  new_critic, new_actor, new_log_alpha, critic_value, actor_value = by_hand(
      state.nets['actor']['params'], critic_params, targets, rows, key)

  assert_trees_close(nets['critic']['params'], new_critic)
  assert_trees_close(nets['actor']['params'], new_actor)
  assert_trees_close(nets['alpha']['params']['log_alpha'], new_log_alpha)
  assert_trees_close(new_targets, {'critic': moved_toward(targets['critic'], new_critic, TAU)})
  assert float(steps['critic'].loss) == pytest.approx(float(critic_value), rel=1e-5)
  assert float(steps['actor'].loss) == pytest.approx(float(actor_value), rel=1e-5)
  assert {name: int(net['step']) for name, net in nets.items()} == {
      'actor': 1, 'critic': 1, 'alpha': 1}
  # The actor's step saw the updated critics, not the ones the step started with.
  assert not np.allclose(variables_of(nets['critic'])['params']['q1']['Dense_0']['kernel'],
                         critic_params['q1']['Dense_0']['kernel'])


@pytest.mark.parametrize('config', [CONFIG, JAX_CONFIG], ids=['gymnasium', 'gymnax'])
def test_two_epochs_resumed_are_the_two_epochs_in_one_go(tmp_path, config):
  rows, arrays = two_epochs_resumed_and_in_one_go(config, 'SAC', tmp_path)
  for row in rows:
    for name in ('critic_loss', 'actor_loss', 'alpha_loss', 'alpha', 'entropy', 'eval_return'):
      assert math.isfinite(row[name]), name
  assert set(arrays['trainers']) == {'actor', 'critic', 'alpha'}
  assert set(arrays['extra']['targets']) == {'critic'}


def test_a_batch_larger_than_the_replay_is_refused_in_one_line(tmp_path):
  assert_refused_in_one_line(CONFIG, 'SAC.batch_size = 30000', tmp_path,
                             'SAC.batch_size (30000) is more than the replay holds',
                             '(100) x n_interactions_per_epoch (200) = 20000')


@pytest.mark.slow
@pytest.mark.usefixtures('full_optimization')
@pytest.mark.parametrize('seed', [0, 1, 2])
def test_sac_learns_pendulum_within_20k_env_steps(tmp_path, seed):
  """The shipped config: a greedy eval of -200 or better within its 20,000 env steps."""
  assert_learns_pendulum(CONFIG, seed, tmp_path)
