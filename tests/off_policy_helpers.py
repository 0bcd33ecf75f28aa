"""What the off-policy trainers' tests share: minibatches, a stand-in critic, a resumed run."""
import os

import jax
import jax.numpy as jnp
import numpy as np

from rl import experiment as run_lib
from rl.algorithms import off_policy
from rl.data.checkpoints import Checkpointer
from rl.metrics import read_metrics
from run_helpers import assert_one_line_error
from run_helpers import cli
from run_helpers import one_epoch_then_a_resumed_one
from run_helpers import without_timing
from value_trainer_helpers import trees_equal


def pendulum_transitions(seed=0, batch=8):
  """Random 2-row slices of Pendulum-shaped transitions; the first rows of two of them end
  their episode (no bootstrap)."""
  rng = np.random.default_rng(seed)
  done = np.zeros((batch, 2), np.float32)
  done[:2, 0] = 1.0
  return {'observation': rng.normal(size=(batch, 2, 3)).astype(np.float32),
          'action': rng.uniform(-2, 2, size=(batch, 2, 1)).astype(np.float32),
          'reward': rng.normal(size=(batch, 2)).astype(np.float32),
          'return_': np.zeros((batch, 2), np.float32),
          'done': done, 'mask': np.ones((batch, 2), np.float32)}


class TwinLinearCritic:
  """Q_i(s, a) = w_i s + a, stacked [2, B, L]."""

  def apply(self, variables, obs, action):
    w = variables['params']['w']
    return jnp.stack([w[i] * obs[..., 0] + action[..., 0] for i in range(2)])


def batch_of(observation, action, reward, done, mask):
  """Transitions of 2-row slices, 1-d observations and actions."""
  def array(x, trailing=False):
    x = np.asarray(x, np.float32)
    return x[..., None] if trailing else x
  return off_policy.transitions({'observation': array(observation, True),
                                 'action': array(action, True), 'reward': array(reward),
                                 'return_': np.zeros_like(array(reward)), 'done': array(done),
                                 'mask': array(mask)})


def sgd_step(loss, params, lr):
  """`params` after one plain gradient-descent step on loss(params), written by hand."""
  return jax.tree_util.tree_map(lambda p, g: p - lr * g, params, jax.grad(loss)(params))


def twin_critic_mse(critic, obs, action, y):
  """The twin critics' summed mean squared errors to y [B] on the first rows, a function of
  their parameters."""
  def loss(params):
    q = critic.apply({'params': params}, obs[:, :1], action[:, :1])[:, :, 0]
    return jnp.mean((q[0] - y) ** 2) + jnp.mean((q[1] - y) ** 2)
  return loss


def moved_toward(targets, params, tau):
  """A Polyak step by hand: each target a fraction tau of the way to its parameters."""
  return jax.tree_util.tree_map(lambda t, p: (1 - tau) * t + tau * p, targets, params)


def assert_trees_close(a, b):
  jax.tree_util.tree_map(lambda x, y: np.testing.assert_allclose(x, y, atol=1e-6, rtol=1e-5),
                         a, b)

def tiny(trainer):
  """Two tiny epochs of `trainer`: the first acts uniformly at random (learning_starts), the
  second with the policy; checkpointed and evaluated after each."""
  return ['train_rl.checkpoint_every = 1', 'RLTask.n_envs = 2'] + [
      f'{trainer}.{binding}' for binding in (
          'n_interactions_per_epoch = 32', 'learning_starts = 32', 'n_eval_episodes = 1',
          'eval_every = 1', 'train_steps_per_epoch = 4', 'batch_size = 16', 'hidden = (16,)',
          'n_replay_epochs = 2')]


def untimed(rows):
  """The rows without their timings (each network's steps_per_second among them)."""
  return [{k: v for k, v in row.items() if not k.endswith('steps_per_second')}
          for row in without_timing(rows)]


def checkpoint(folder):
  return Checkpointer(os.path.join(folder, 'checkpoints')).restore_latest()[1]


def two_epochs_resumed_and_in_one_go(config, trainer, tmp_path):
  """(metrics rows, last checkpoint's arrays) of `config`'s two tiny epochs, the second resumed
  from the first's checkpoint, after checking them against the same two epochs in one go:
  the same metrics and the same networks, targets and collection state."""
  bindings = tiny(trainer)
  resumed = tmp_path / 'resumed'
  rows = one_epoch_then_a_resumed_one(config, resumed, bindings)
  straight = tmp_path / 'straight'
  result = cli(f'--config_file={config}', f'--output_dir={straight}',
               *(f'--config={b}' for b in bindings + ['train_rl.n_epochs = 2']))
  assert result.returncode == 0, result.stderr
  assert untimed(read_metrics(str(straight))) == untimed(rows)
  a, b = checkpoint(str(straight)), checkpoint(str(resumed))
  for part in ('trainers', 'extra', 'collect'):
    assert trees_equal(a[part], b[part]), part
  return rows, a


def assert_refused_in_one_line(config, binding, tmp_path, *needles):
  """`config` with `binding` fails with one line holding every needle, and writes no folder."""
  out = tmp_path / 'run'
  result = cli(f'--config_file={config}', f'--output_dir={out}', f'--config={binding}')
  assert_one_line_error(result, *needles)
  assert not out.exists()


def assert_learns_pendulum(config, seed, tmp_path):
  """`config` reaches a greedy eval of -200 or better within its 20,000 env steps (the run
  stops at its first such eval)."""
  trainer = run_lib.execute([config], ['train_rl.stop_at_return = -200'], str(tmp_path / 'run'),
                            seed=seed)
  evals = [(r['env_steps'], r['eval_return']) for r in trainer.history if 'eval_return' in r]
  assert evals and evals[-1][0] <= 20_000 and evals[-1][1] >= -200, evals
