"""An update that steps two networks on one minibatch: the DDPG example of docs/extending.md.

Its gradient step (critic on TD targets, then the actor through the updated
critic, then Polyak targets) is checked against the same step written by hand
with jax.grad, and the example runs through rl.run for two tiny epochs.
"""
import importlib
import math
import os

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from rl.envs.task import RLTask
from rl.learner.fused_epoch import variables_of
from rl.optim import optimizers
from off_policy_helpers import pendulum_transitions
from run_helpers import ROOT
from run_helpers import one_epoch_then_a_resumed_one

CONFIG = os.path.join('docs', 'examples', 'ddpg_pendulum.gin')
GAMMA, LR, TAU = 0.9, 0.05, 0.1


@pytest.fixture
def ddpg(monkeypatch):
  """The example module, imported as the config's gin `import` does, from the repository root."""
  monkeypatch.syspath_prepend(ROOT)
  return importlib.import_module('docs.examples.ddpg')


def test_a_step_trains_the_critic_then_the_actor_through_it_as_jax_grad_does(ddpg):
  task = RLTask(env='Pendulum-v1', n_envs=2, gamma=GAMMA, seed=0)
  sgd = lambda: optimizers.SGD  # noqa: E731  (a factory of the optimizer factory)
  schedule = lambda: (lambda step: LR)  # noqa: E731
  trainer = ddpg.DDPG(task, hidden=(16,), actor_optimizer=sgd(), actor_lr_schedule=schedule,
                      critic_optimizer=sgd(), critic_lr_schedule=schedule, tau=TAU,
                      n_interactions_per_epoch=2)
  state = trainer.learner.train_state
  # Targets unlike the networks, so that the TD targets and Polyak step are seen.
  targets = jax.tree_util.tree_map(lambda p: p * 0.5, state.extra['targets'])
  rows = pendulum_transitions()
  (nets, new_targets), steps = jax.jit(trainer.train_step)(
      (state.nets, targets), rows, jax.random.PRNGKey(0))

  actor, critic = trainer.actor_net.model, trainer.critic_net.model
  obs, action = rows['observation'], rows['action']
  # y = r + gamma Q'(s', mu'(s')) where the first row does not end its episode.
  next_q = critic.apply({'params': targets['critic']}, obs[:, 1:],
                        actor.apply({'params': targets['actor']}, obs[:, 1:]))[:, 0]
  y = rows['reward'][:, 0] + GAMMA * (1.0 - rows['done'][:, 0]) * next_q

  def critic_loss(params):
    return jnp.mean((critic.apply({'params': params}, obs[:, :1], action[:, :1])[:, 0] - y) ** 2)
  critic_params = state.nets['critic']['params']
  critic_grads = jax.grad(critic_loss)(critic_params)
  new_critic = jax.tree_util.tree_map(lambda p, g: p - LR * g, critic_params, critic_grads)

  def actor_loss(params):
    return -jnp.mean(critic.apply({'params': new_critic}, obs[:, :1],
                                  actor.apply({'params': params}, obs[:, :1])))
  actor_params = state.nets['actor']['params']
  new_actor = jax.tree_util.tree_map(lambda p, g: p - LR * g, actor_params,
                                     jax.grad(actor_loss)(actor_params))

  def close(a, b):
    jax.tree_util.tree_map(lambda x, y: np.testing.assert_allclose(x, y, atol=1e-6, rtol=1e-6),
                           a, b)
  close(nets['critic']['params'], new_critic)
  close(nets['actor']['params'], new_actor)
  close(new_targets, {'actor': jax.tree_util.tree_map(lambda t, p: (1 - TAU) * t + TAU * p,
                                                       targets['actor'], new_actor),
                      'critic': jax.tree_util.tree_map(lambda t, p: (1 - TAU) * t + TAU * p,
                                                        targets['critic'], new_critic)})
  assert float(steps['critic'].loss) == pytest.approx(float(critic_loss(critic_params)), rel=1e-6)
  assert float(steps['actor'].loss) == pytest.approx(float(actor_loss(actor_params)), rel=1e-6)
  assert int(nets['critic']['step']) == int(nets['actor']['step']) == 1
  # The actor's step saw the updated critic, not the one the step started with.
  assert not np.allclose(variables_of(nets['critic'])['params']['Dense_0']['kernel'],
                         critic_params['Dense_0']['kernel'])


def test_rl_run_trains_the_example_for_two_epochs_and_resumes(tmp_path):
  tiny = ['train_rl.checkpoint_every = 1', 'DDPG.n_interactions_per_epoch = 64',
          'DDPG.n_eval_episodes = 1', 'DDPG.train_steps_per_epoch = 4', 'DDPG.batch_size = 16',
          'RLTask.n_envs = 2']
  rows = one_epoch_then_a_resumed_one(CONFIG, tmp_path, tiny)
  for row in rows:
    assert math.isfinite(row['critic_loss']) and math.isfinite(row['actor_loss'])
    assert row['actor_learning_rate'] == row['critic_learning_rate'] == pytest.approx(1e-3)
