"""TD3 (rl/algorithms/td3.py): its targets and loss by hand, its step against jax.grad, its
configs.

The smoothed TD targets and the actor's loss are checked on examples worked
out in the comments; one gradient step against the same step written with
jax.grad, and the policy delay (the actor and the targets move on every
second critic step only); both shipped configs for two epochs, the second
resumed from the first's checkpoint, against the same two epochs in one go;
a discrete action space refused in one line; and, marked slow, learning Pendulum.
"""
import math
import os

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from rl.algorithms import td3
from rl.envs.task import RLTask
from rl.ops import advantages
from rl.optim import optimizers
from off_policy_helpers import TwinLinearCritic
from off_policy_helpers import assert_learns_pendulum
from off_policy_helpers import assert_trees_close
from off_policy_helpers import batch_of
from off_policy_helpers import moved_toward
from off_policy_helpers import pendulum_transitions
from off_policy_helpers import sgd_step
from off_policy_helpers import twin_critic_mse
from off_policy_helpers import two_epochs_resumed_and_in_one_go
from run_helpers import ROOT
from value_trainer_helpers import trees_equal

CONFIG = os.path.join(ROOT, 'configs', 'td3_pendulum.gin')
JAX_CONFIG = os.path.join(ROOT, 'configs', 'td3_pendulum_jax.gin')


class LinearActor:
  """mu(s) = m s of a 1-d observation s."""

  def apply(self, variables, obs):
    return variables['params']['m'] * obs


def test_smoothed_td_targets_by_hand():
  # Target actor mu'(s) = 1.5 s, target critics Q'_i = w_i s + a with w = (2, 3), box [-2, 2],
  # noise clipped to +-0.5, gamma 0.9:
  #   s' = 1: a' = clip(1.5 + clip(0.8)) = 2; min(4, 5) = 4; y = 1 + 0.9 * 4 = 4.6.
  #   s' = -1: a' = -1.5 - 0.3 = -1.8; min(-3.8, -4.8) = -4.8; y = 0.5 - 0.9 * 4.8 = -3.82.
  #   s' = 2: a' = clip(3) = 2, but the first row terminates: y = r = -1.
  batch = batch_of([[0.0, 1.0], [0.0, -1.0], [0.0, 2.0]], np.zeros((3, 2)),
                   [[1.0, 0.0], [0.5, 0.0], [-1.0, 0.0]], [[0.0, 0.0], [0.0, 0.0], [1.0, 0.0]],
                   np.ones((3, 2)))
  targets = {'actor': {'m': 1.5}, 'critic': {'w': jnp.array([2.0, 3.0])}}
  y = td3.smoothed_td_targets(LinearActor(), TwinLinearCritic(), targets, batch,
                              np.array([0.8, -0.3, 0.0]).reshape(3, 1, 1), 0.5, -2.0, 2.0,
                              advantages.td_k(gamma=0.9, margin=1))
  np.testing.assert_allclose(y, [[4.6], [-3.82], [-1.0]], rtol=1e-6)


def test_actor_loss_by_hand():
  # mu(s) = s at s = 0.5 and 1; Q1 = 2 s + mu(s) = 1.5 and 3: loss -(1.5 + 3) / 2 = -2.25.
  batch = batch_of([[0.5, 0.0], [1.0, 0.0]], np.zeros((2, 2)), np.zeros((2, 2)),
                   np.zeros((2, 2)), np.ones((2, 2)))
  loss, _ = td3.actor_loss(LinearActor(), TwinLinearCritic(), {'params': {'m': 1.0}},
                           {'params': {'w': jnp.array([2.0, 3.0])}}, batch)
  assert float(loss) == pytest.approx(-2.25)


def test_noisy_actions_are_mu_greedily_clipped_to_the_box_and_uniform_before_learning():
  acting = td3.NoisyActions((1,), -2.0, 2.0, std=1.0)
  mu = np.full((4000, 1), 1.9, np.float32)
  key = jax.random.PRNGKey(0)
  np.testing.assert_array_equal(acting.sample(mu, key, 0.0), mu)
  noisy = acting.sample(mu, key, 1.0)
  assert np.array_equal(noisy, acting.sample_given(mu, acting.noise(key, (4000,)), 1.0))
  assert float(noisy.max()) == 2.0 and float(noisy.min()) >= -2.0
  assert float(np.mean(noisy == 2.0)) > 0.4  # the half of the draws above mu + 0.1, clipped
  uniform = acting.sample(mu, key, 1.0, np.float32(1))
  assert float(np.mean(uniform)) == pytest.approx(0.0, abs=0.1)


GAMMA, LR, TAU = 0.9, 0.05, 0.1


def sgd_td3(policy_delay):
  task = RLTask(env='Pendulum-v1', n_envs=2, gamma=GAMMA, seed=0)
  sgd = lambda: optimizers.SGD  # noqa: E731  (a factory of the optimizer factory)
  schedule = lambda: (lambda step: LR)  # noqa: E731
  return td3.TD3(task, hidden=(16,), actor_optimizer=sgd(), actor_lr_schedule=schedule,
                 critic_optimizer=sgd(), critic_lr_schedule=schedule, tau=TAU,
                 policy_delay=policy_delay, n_interactions_per_epoch=2, batch_size=2,
                 n_replay_epochs=2)


def test_a_step_trains_the_critics_then_the_actor_through_them_as_jax_grad_does():
  trainer = sgd_td3(policy_delay=1)
  state = trainer.learner.train_state
  targets = jax.tree_util.tree_map(lambda p: p * 0.5, state.extra['targets'])
  rows, key = pendulum_transitions(), jax.random.PRNGKey(3)
  (nets, new_targets), steps = jax.jit(trainer.train_step)((state.nets, targets), rows, key)

  actor, critic = trainer.actor_net.model, trainer.critic_net.model

  # The same step written with jax.grad, jitted: one compile, where op by op each op compiles.
  @jax.jit
  def by_hand(actor_params, critic_params, targets, rows, key):
    obs, action = rows['observation'], rows['action']
    # Pendulum's box is [-2, 2]: smoothing noise of std 0.2 x 2, clipped to +-0.5 x 2.
    noise = jnp.clip(0.4 * jax.random.normal(key, (8, 1, 1)), -1.0, 1.0)
    next_a = jnp.clip(actor.apply({'params': targets['actor']}, obs[:, 1:]) + noise, -2, 2)
    next_q = jnp.min(critic.apply({'params': targets['critic']}, obs[:, 1:], next_a), axis=0)
    y = rows['reward'][:, 0] + GAMMA * (1 - rows['done'][:, 0]) * next_q[:, 0]

    critic_loss = twin_critic_mse(critic, obs, action, y)
    new_critic = sgd_step(critic_loss, critic_params, LR)

    def actor_loss(params):
      mu = actor.apply({'params': params}, obs[:, :1])
      return -jnp.mean(critic.apply({'params': new_critic}, obs[:, :1], mu)[0])
    new_actor = sgd_step(actor_loss, actor_params, LR)
    return new_critic, new_actor, critic_loss(critic_params), actor_loss(actor_params)

  new_critic, new_actor, critic_value, actor_value = by_hand(
      state.nets['actor']['params'], state.nets['critic']['params'], targets, rows, key)

  assert_trees_close(nets['critic']['params'], new_critic)
  assert_trees_close(nets['actor']['params'], new_actor)
  assert_trees_close(new_targets, {'actor': moved_toward(targets['actor'], new_actor, TAU),
                                   'critic': moved_toward(targets['critic'], new_critic, TAU)})
  assert float(steps['critic'].loss) == pytest.approx(float(critic_value), rel=1e-5)
  assert float(steps['actor'].loss) == pytest.approx(float(actor_value), rel=1e-5)


def test_the_actor_and_the_targets_move_on_every_second_critic_step():
  trainer = sgd_td3(policy_delay=2)
  state = trainer.learner.train_state
  step = jax.jit(trainer.train_step)
  rows = pendulum_transitions()
  first, _ = step((state.nets, state.extra['targets']), rows, jax.random.PRNGKey(0))
  second, _ = step(first, rows, jax.random.PRNGKey(1))
  (nets, targets), (nets_2, targets_2) = first, second
  # Critic step 1: the critics move, the actor (its optimizer state and count) and targets not.
  assert int(nets['critic']['step']) == 1 and int(nets['actor']['step']) == 0
  assert trees_equal(nets['actor'], state.nets['actor'])
  assert trees_equal(targets, state.extra['targets'])
  # Critic step 2: all move.
  assert int(nets_2['critic']['step']) == 2 and int(nets_2['actor']['step']) == 1
  assert not trees_equal(nets_2['actor']['params'], nets['actor']['params'])
  assert not trees_equal(targets_2['actor'], targets['actor'])
  assert not trees_equal(targets_2['critic'], targets['critic'])


@pytest.mark.parametrize('config', [CONFIG, JAX_CONFIG], ids=['gymnasium', 'gymnax'])
def test_two_epochs_resumed_are_the_two_epochs_in_one_go(tmp_path, config):
  rows, arrays = two_epochs_resumed_and_in_one_go(config, 'TD3', tmp_path)
  for row in rows:
    for name in ('critic_loss', 'actor_loss', 'q_mean', 'eval_return'):
      assert math.isfinite(row[name]), name
  assert set(arrays['trainers']) == {'actor', 'critic'}
  assert set(arrays['extra']['targets']) == {'actor', 'critic'}


@pytest.mark.slow
@pytest.mark.usefixtures('full_optimization')
@pytest.mark.parametrize('seed', [0, 1, 2])
def test_td3_learns_pendulum_within_20k_env_steps(tmp_path, seed):
  """The shipped config: a greedy eval of -200 or better within its 20,000 env steps."""
  assert_learns_pendulum(CONFIG, seed, tmp_path)
