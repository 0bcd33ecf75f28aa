"""A `--seeds` batch evaluates its seeds in one vmapped program (rl.seeds.play_together)."""
import os

import jax
import numpy as np
import pytest

from rl import experiment as run_lib
from rl import seeds as seeds_lib
from rl.data.checkpoints import Checkpointer
from rl.learner import loop as loop_lib
from rl.envs.task import RLTask
from rl.algorithms import PPO
from run_helpers import PPO_JAX
from run_helpers import TINY_PPO_JAX
from test_jax_epoch_dispatch import TINY_PPO
from test_jax_epoch_dispatch import clean_gin  # noqa: F401  (autouse: MLP.layer_widths = (8,))
from test_jax_epoch_dispatch import compilations

pytest.importorskip('gymnax')



def test_seeds_evaluated_together_score_as_alone():
  learners = [PPO(RLTask(env='gymnax:CartPole-v1', n_envs=4, seed=seed),
                  **dict(TINY_PPO, n_eval_episodes=3)).learner for seed in (0, 1, 2)]
  for learner in learners[1:]:
    learner.share_programs(learners[0])
  for learner in learners:
    learner.run_epoch()  # epoch 1 trains; epoch 2 evaluates
  state = jax.tree_util.tree_map(lambda *leaves: jax.numpy.stack(leaves),
                                 *[learner.train_state for learner in learners])
  seeds_lib.compile_evaluation(learners, state)
  with compilations() as made:
    played = seeds_lib.play_together(learners, state, 1)  # after each seed's next epoch
  assert made == []  # compiled beforehand, as the batch's first epoch does
  together = seeds_lib.read_together(jax.device_get(played), [0, 2], 0.5)
  assert sorted(together) == [0, 2]
  assert together[0][1] == together[2][1] == 0.25  # each seed's share of the seconds
  alone = [learner.evaluate(epoch=2) for learner in learners]
  assert together[0][0] == alone[0] and together[2][0] == alone[2]
  assert alone[0] != alone[2]  # different seeds, different evaluations


class _Learner:
  """What EpochLoop.needs_state reads of a learner: it evaluates every 2nd epoch."""
  epoch, history, last_epoch = 0, [], None

  @staticmethod
  def evaluates(epoch):
    return epoch % 2 == 0


def test_an_epoch_evaluated_with_its_batch_needs_its_state_only_to_checkpoint():
  loop = loop_lib.EpochLoop(_Learner(), 12, checkpoint_fn=lambda: None, checkpoint_every=5,
                            stop_at_return=100)
  assert not loop.needs_state(3)
  assert loop.needs_state(5) and loop.needs_state(12)  # a checkpoint; the last epoch
  assert loop.needs_state(4)  # evaluated alone: the evaluation reads the state
  below, reached = ({'eval_return': 20.0}, 0.1, 0.1), ({'eval_return': 120.0}, 0.1, 0.1)
  assert not loop.needs_state(4, below)
  assert loop.needs_state(4, reached)  # reaching the target checkpoints the run
  assert loop.needs_state(10, below)


def test_a_seed_that_stops_in_its_batch_checkpoints_the_state_it_stopped_at(tmp_path):
  """Seed 1 reaches its target at epoch 2, an epoch it evaluates with its batch and that
  does not checkpoint on its own: its checkpoint holds that epoch's state, as alone."""
  bindings = ['train_rl.n_epochs = 6', 'train_rl.checkpoint_every = 5',
              'train_rl.stop_at_return = 1', 'PPO.eval_every = 2', *TINY_PPO_JAX]
  run_lib.execute([PPO_JAX], bindings, str(tmp_path / 'alone'), 1)
  run_lib.execute_seeds([PPO_JAX], bindings, str(tmp_path / 'batch'), [0, 1])
  (step, batch, _), (alone_step, alone, _) = (
      Checkpointer(os.path.join(folder, 'checkpoints')).restore_latest()
      for folder in (tmp_path / 'batch' / 'seed_1', tmp_path / 'alone'))
  assert step == alone_step == 2
  # Equal up to rounding: a batch's matrix products add in another order.
  jax.tree_util.tree_map(
      lambda got, want: np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-6),
      batch['trainers'], alone['trainers'])
