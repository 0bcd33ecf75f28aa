"""The worked example of docs/extending.md: KL-penalty PPO in a user's file, run by rl.run."""
import importlib
import math
import os

import numpy as np
import pytest

from run_helpers import ROOT
from run_helpers import one_epoch_then_a_resumed_one

CONFIG = os.path.join('docs', 'examples', 'kl_ppo_cartpole.gin')
# Two tiny epochs: 64 env steps, 2 gradient steps a network, one eval episode.
TINY = ['train_rl.checkpoint_every = 1',
        'KLPPO.n_interactions_per_epoch = 64', 'KLPPO.n_eval_episodes = 1',
        'KLPPO.policy_batch_size = 32', 'KLPPO.policy_train_steps_per_epoch = 2',
        'KLPPO.value_batch_size = 32', 'KLPPO.value_train_steps_per_epoch = 2']


@pytest.fixture
def kl_ppo(monkeypatch):
  """The example module, imported as the config's gin `import` does, from the repository root."""
  monkeypatch.syspath_prepend(ROOT)
  return importlib.import_module('docs.examples.kl_ppo')


def test_kl_penalty_loss_by_hand(kl_ppo):
  # Real steps: r = 2 (log 2 - log 4 = log 2) and r = 1/2; step 3 is padding.
  # -E[r A] = -(2 * 1 + 0.5 * (-2)) / 2 = -0.5.
  # E[KL] = ((2 - 1 - log 2) + (0.5 - 1 + log 2)) / 2 = 0.5 / 2 = 0.25.
  # E[H] = (0.5 + 0.3) / 2 = 0.4.
  # beta 0.5, entropy_coeff 0.1: -0.5 + 0.5 * 0.25 - 0.1 * 0.4 = -0.415.
  log_probs = np.log([[0.5, 0.25, 0.9]])
  old_log_probs = np.log([[0.25, 0.5, 0.1]])
  advantages = np.array([[1.0, -2.0, 7.0]])
  entropy = np.array([[0.5, 0.3, 9.0]])
  mask = np.array([[1.0, 1.0, 0.0]])
  loss = kl_ppo.kl_penalty_loss(log_probs, old_log_probs, advantages, entropy, mask,
                                beta=0.5, entropy_coeff=0.1)
  assert float(loss) == pytest.approx(-0.415, abs=1e-6)


def test_beta_doubles_above_and_halves_below_the_target_band(kl_ppo):
  # kl_target 0.01: the band is (0.01 / 1.5, 0.015].
  assert [float(kl_ppo.adapted_beta(1.0, kl, 0.01)) for kl in (0.02, 0.01, 0.005)] == [
      2.0, 1.0, 0.5]


def test_rl_run_trains_the_example_and_resumes_its_beta(tmp_path):
  # One epoch, then a rerun resumes from its checkpoint for the second.
  rows = one_epoch_then_a_resumed_one(CONFIG, tmp_path, TINY)
  assert all(math.isfinite(row['policy_loss']) for row in rows)
  # Epoch 2 trains with the beta that epoch 1's KL set: doubled, kept or
  # halved from 1.0, carried through the checkpoint.
  kl = rows[0]['approximate_kl_divergence']
  expected = 2.0 if kl > 0.015 else 0.5 if kl < 0.01 / 1.5 else 1.0
  assert (rows[0]['kl_beta'], rows[1]['kl_beta']) == (1.0, expected)
