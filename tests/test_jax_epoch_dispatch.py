"""JAX-native epochs: what each epoch dispatches ahead, and which epoch compiles what."""
import contextlib

import gin
import jax
import pytest

from rl.envs.task import RLTask
from rl.algorithms import PPO

pytest.importorskip('gymnax')

CARTPOLE = 'gymnax:CartPole-v1'
TINY_PPO = dict(n_interactions_per_epoch=32, value_train_steps_per_epoch=2,
                policy_train_steps_per_epoch=2, value_batch_size=16, policy_batch_size=16,
                added_policy_slice_length=4, n_eval_episodes=2, eval_every=2)
BACKEND_COMPILE = '/jax/core/compile/backend_compile_duration'


@pytest.fixture(autouse=True)
def clean_gin():
  gin.clear_config()
  gin.parse_config(['MLP.layer_widths = (8,)'])
  yield
  gin.clear_config()


def trainer(seed, last_epoch):
  made = PPO(RLTask(env=CARTPOLE, n_envs=4, seed=seed), **TINY_PPO)
  made.learner.last_epoch = last_epoch  # as the epoch loop sets it
  return made


@contextlib.contextmanager
def compilations():
  """The names of the XLA compilations made inside the block (a list, filled as they happen)."""
  made = []

  def listen(event, seconds, **kwargs):
    del seconds, kwargs
    if event == BACKEND_COMPILE:
      made.append(event)
  jax.monitoring.register_event_duration_secs_listener(listen)
  try:
    yield made
  finally:
    jax.monitoring.unregister_event_duration_listener(listen)


def test_an_evaluating_epoch_dispatches_the_next_behind_its_evaluation():
  learner = trainer(seed=5, last_epoch=6).learner
  calls = []
  play, dispatch = learner.task.play, learner.look_ahead.dispatch

  def recorded_play(*args):
    calls.append('play')
    return play(*args)

  def recorded_dispatch(state, carry, firsts, n):
    calls.append((firsts[0], n))
    return dispatch(state, carry, firsts, n)
  learner.task.play = recorded_play
  learner.look_ahead.dispatch = recorded_dispatch
  pending = []
  for _ in range(6):
    record = learner.run_epoch()
    queued = learner.look_ahead.queued
    pending.append((record['epoch'], 'eval_return' in record,
                    queued[0].firsts[0] if queued else None))
  # Epochs 2, 4 and 6 evaluate. The first call runs one epoch (it compiles);
  # then each call runs up to the next evaluation, and the call after it is
  # on its way while it is booked.
  assert pending == [(1, False, 2), (2, True, 3), (3, False, 5), (4, True, 5),
                     (5, False, None), (6, True, None)]
  # An evaluation goes to the device straight behind its call, before the call
  # after it, which would otherwise hold it up.
  assert calls == [(1, 1), (2, 1), 'play', (3, 2), 'play', (5, 2), 'play']


def test_the_first_epoch_compiles_the_evaluation_program_too():
  learner = trainer(seed=6, last_epoch=4).learner
  with compilations() as first:
    first_record = learner.run_epoch()
  with compilations() as evaluating:
    record = learner.run_epoch()
  assert 'eval_return' not in first_record and 'eval_return' in record
  assert first  # the epoch's program and the evaluation's
  # Epoch 2 plays its evaluation with the program the first epoch compiled,
  # so its time_eval is playing only and time_compile counted the rest.
  assert evaluating == []
