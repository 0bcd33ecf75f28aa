"""A `--seeds` batch evaluates its seeds in one vmapped program (rl.seeds.evaluate_together)."""
import jax
import pytest

from rl import seeds as seeds_lib
from rl.envs.task import RLTask
from rl.algorithms import PPO
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
    together = seeds_lib.evaluate_together(learners, state, [0, 2])
  assert made == []  # compiled beforehand, as the batch's first epoch does
  assert sorted(together) == [0, 2]
  metrics, seconds, share = together[0]
  assert share == pytest.approx(seconds / 2)
  alone = [learner.evaluate(epoch=2) for learner in learners]
  assert together[0][0] == alone[0] and together[2][0] == alone[2]
  assert alone[0] != alone[2]  # different seeds, different evaluations
