"""Actor-critic trainers (A2C, PPO, AWR, SamplingAWR): epochs, shared layers, Q-values, losses.

Every trainer here is tiny (2 envs, 16 steps an epoch, batches of 4, an 8-wide
MLP) because most of an epoch's cost is jit compilation, paid once per
trainer; the file has to stay well under a minute on a loaded 2-core machine.
"""
import math
import os

import gin
import gymnasium as gym
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import batch_helpers
from rl.ops import advantages
from rl.nets.variables import top_level_layers
from rl import experiment as run_lib
from rl.errors import ConfigError
from rl.metrics import TIMING_KEYS
from rl.metrics import read_metrics
from rl.envs.task import RLTask
from rl.algorithms import A2C
from rl.algorithms import AWR
from rl.algorithms import PPO
from rl.algorithms import SamplingAWR
from rl.ops import q_values

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PPO_CONFIG = os.path.join(ROOT, 'configs', 'ppo_cartpole.gin')

# Small models, and a constant learning rate: the default schedule warms up
# from 0, so the first updates would not move any weights.
TINY_GIN = ['MLP.layer_widths = (8,)', 'Value.inject_actions_dim = 8',
            "multifactor.factors = 'constant'", 'multifactor.constant = 0.01']
# The smallest epoch the trainers accept: 2 envs x 8 steps, 1 value and 2
# policy gradient steps on batches of 4 slices.
TINY = dict(n_interactions_per_epoch=16, value_train_steps_per_epoch=1,
            policy_train_steps_per_epoch=2, policy_batch_size=4, value_batch_size=4)


def tiny(**overrides):
  """TINY with the estimator's one bootstrap step, updated by `overrides`."""
  return {**TINY, 'added_policy_slice_length': 1, **overrides}


@pytest.fixture(autouse=True, scope='module')
def fast_compilation(tmp_path_factory):
  """Cheaper XLA compilation for this module only, restored afterwards.

  Nearly all of a tiny epoch is XLA compiling the trainer's jitted steps, and
  each trainer jits its own bound methods, so jax's in-memory cache never
  helps a second trainer. Two settings cut that down:
  * no XLA optimisation passes (about half the compile time);
  * a compilation cache in a fresh temporary folder: trainers built alike
    (the four aggregates, the three estimators) lower to the same programs
    and load them instead of compiling again.
  Every comparison below is between runs made under the same settings.
  """
  from jax.experimental.compilation_cache import compilation_cache
  # jax reads flags that have a context manager as attributes, the others
  # only through read().
  before = {
      'jax_disable_most_optimizations': jax.config.read('jax_disable_most_optimizations'),
      'jax_persistent_cache_min_compile_time_secs':
          jax.config.jax_persistent_cache_min_compile_time_secs,
      'jax_compilation_cache_dir': jax.config.jax_compilation_cache_dir,
  }
  jax.config.update('jax_disable_most_optimizations', True)
  # Cache every program: ours compile in well under the 1 s default threshold.
  jax.config.update('jax_persistent_cache_min_compile_time_secs', 0.0)
  jax.config.update('jax_compilation_cache_dir', str(tmp_path_factory.mktemp('xla_cache')))
  # The cache decides once per process whether it is on; make it look again.
  compilation_cache.reset_cache()
  yield
  for name, value in before.items():
    jax.config.update(name, value)
  compilation_cache.reset_cache()


def task_for(env, **kwargs):
  # The trainers build their models from gin factories at construction, so
  # the small sizes must be bound before any trainer is made.
  gin.parse_config(TINY_GIN)
  return RLTask(env=env, n_envs=2, seed=0, **kwargs)


def finite_numbers(record):
  """The record's numeric entries; train_return is NaN when no episode ended."""
  return {k: v for k, v in record.items()
          if isinstance(v, (int, float)) and k != 'train_return'}


def params_of(trainer, name):
  return jax.device_get(trainer.learner.networks[name].model_weights)


def trees_equal(a, b):
  """Same structure and bit-identical leaves."""
  if jax.tree_util.tree_structure(a) != jax.tree_util.tree_structure(b):
    return False
  return all(np.array_equal(x, y) for x, y in
             zip(jax.tree_util.tree_leaves(a), jax.tree_util.tree_leaves(b)))


# -- 1. counters and exact resume through the runner -----------------------------------

# A2C on top of the shipped PPO config (its PPO.* bindings are then unused):
# one value and two policy steps per epoch, the body shared. The runner also
# checkpoints after the last epoch, so checkpoint_every = 2 still leaves the
# 2-epoch run resumable while saving fewer checkpoints (they are slow).
A2C_RUN = ['train_rl.trainer_class = @A2C', 'train_rl.checkpoint_every = 2',
           'RLTask.n_envs = 2', 'MLP.layer_widths = (8,)',
           'A2C.n_interactions_per_epoch = 16', 'A2C.added_policy_slice_length = 1',
           'A2C.value_train_steps_per_epoch = 1', 'A2C.policy_train_steps_per_epoch = 2',
           'A2C.policy_batch_size = 4', 'A2C.value_batch_size = 4',
           'A2C.n_shared_layers = 1',
           # A constant rate: under the default warm-up the first steps barely move
           # the weights, and a resume that lost them would go unnoticed.
           "multifactor.factors = 'constant'", 'multifactor.constant = 0.01']


def steps(trainer):
  return trainer.learner.networks['value'].step, trainer.learner.networks['policy'].step


def without_timing(records):
  return [{k: v for k, v in r.items() if k not in TIMING_KEYS} for r in records]


def test_step_counters_survive_a_resume_and_the_resumed_run_matches(tmp_path):
  resumed = str(tmp_path / 'resumed')
  trainer = run_lib.execute([PPO_CONFIG], A2C_RUN + ['train_rl.n_epochs = 2'], resumed)
  assert steps(trainer) == (2, 4)
  # Same folder, more epochs: only n_epochs changed, so the run resumes.
  trainer = run_lib.execute([PPO_CONFIG], A2C_RUN + ['train_rl.n_epochs = 3'], resumed)
  assert trainer.epoch == 3
  assert steps(trainer) == (3, 6)

  straight = str(tmp_path / 'straight')
  trainer = run_lib.execute([PPO_CONFIG], A2C_RUN + ['train_rl.n_epochs = 3'], straight)
  assert steps(trainer) == (3, 6)
  expected = without_timing(read_metrics(straight))
  assert [r['epoch'] for r in expected] == [1, 2, 3]
  assert without_timing(read_metrics(resumed)) == expected


# -- 2. n_shared_layers ------------------------------------------------------------------

def test_shared_layers_are_copied_between_the_policy_and_the_value_net():
  trainer = A2C(task_for('CartPole-v1'), n_shared_layers=1, **tiny())
  policy_t, value_t = trainer.learner.networks['policy'], trainer.learner.networks['value']
  shared = top_level_layers(policy_t.variables)[:1]
  assert shared == top_level_layers(value_t.variables)[:1] == ['body']
  # Different init seeds: before any epoch the bodies differ, so equality
  # below can only come from the copying.
  assert not trees_equal(params_of(trainer, 'policy')['body'],
                         params_of(trainer, 'value')['body'])

  # Snapshot both nets as each of them starts to train (ActorCriticTrainer.update:
  # policy -> value before value training, value -> policy after it). Each
  # network's epoch is one `fit` inside the epoch's compiled update; a debug
  # callback hands the state it starts from back to the host.
  snapshots = {}
  original = trainer.fit

  def fit(state, name, *args, **kwargs):
    def record(policy, value):
      snapshots[name] = (jax.device_get(policy), jax.device_get(value))
    jax.debug.callback(record, state.nets['policy']['params'], state.nets['value']['params'])
    return original(state, name, *args, **kwargs)
  trainer.fit = fit
  trainer.learner.collect(n_interactions=16)
  trainer.learner.train_epoch()
  jax.effects_barrier()

  policy_before_value, value_before_value = snapshots['value']
  assert trees_equal(policy_before_value['body'], value_before_value['body'])
  policy_before_policy, value_before_policy = snapshots['policy']
  assert trees_equal(policy_before_policy['body'], value_before_policy['body'])
  # The value step really trained the shared body, so the copy back mattered.
  assert not trees_equal(value_before_value['body'], value_before_policy['body'])

  policy_after, value_after = params_of(trainer, 'policy'), params_of(trainer, 'value')
  # The value net keeps the body it handed over; the policy then trains on it,
  # so after train_epoch the two bodies only agree again at the next epoch's
  # copy (they are NOT equal here: the policy steps moved the policy's copy).
  assert trees_equal(value_after['body'], value_before_policy['body'])
  assert not trees_equal(policy_after['body'], value_after['body'])
  # Only layer 0 is shared: each net keeps its own head, and the policy head
  # was trained by the policy steps.
  assert 'value_head' not in policy_after and 'policy_head' not in value_after
  assert not trees_equal(policy_after['policy_head'], policy_before_policy['policy_head'])


def test_a_shared_normalizer_trains_both_nets_on_the_acting_statistics():
  """With Normalize among the shared layers, both nets train on this epoch's statistics.

  The acting policy folds every collected observation into its normaliser,
  so the data of an epoch was normalised with the statistics as they stand
  after its collection; the value and the policy steps must see exactly
  those, in the first epoch (when the trainers still hold the fresh,
  count-0 statistics) as in later ones.
  """
  gin.parse_config(['Policy.normalizer = @Normalize', 'Value.normalizer = @Normalize'])
  trainer = A2C(task_for('CartPole-v1'), n_shared_layers=1, **tiny())
  policy_t, value_t = trainer.learner.networks['policy'], trainer.learner.networks['value']
  assert top_level_layers(policy_t.variables)[:1] == ['normalizer']
  seen = {}
  original = trainer.fit

  def fit(state, name, *args, **kwargs):
    # The model state each network starts its training from, handed to the host.
    jax.debug.callback(lambda model_state: seen.__setitem__(name, jax.device_get(model_state)),
                       state.nets[name]['model_state'])
    return original(state, name, *args, **kwargs)
  trainer.fit = fit
  for epoch in (1, 2):
    # trainer.learner.collect keeps the acting state (the normaliser statistics) it moved on.
    trainer.learner.collect(n_interactions=16, epoch_id=epoch)
    acting = jax.device_get(trainer.learner.acting.model_state)
    assert float(acting['normalizer']['normalizer']['count']) == 16 * epoch
    trainer.learner.train_epoch()
    jax.effects_barrier()
    assert trees_equal(seen['value'], acting), f'epoch {epoch}: value net'
    assert trees_equal(seen['policy'], acting), f'epoch {epoch}: policy net'


class _OffsetBoxEnv(gym.Env):
  """A one-step-per-reward env whose Box actions live in [4, 10]^2, far from 0."""

  observation_space = gym.spaces.Box(-1.0, 1.0, (1,), np.float32)
  action_space = gym.spaces.Box(4.0, 10.0, (2,), np.float32)

  def reset(self, *, seed=None, options=None):
    super().reset(seed=seed)
    self._t = 0
    return np.zeros(1, np.float32), {}

  def step(self, action):
    self._t += 1
    return np.zeros(1, np.float32), 0.0, self._t >= 20, False, {}


if 'rl_test/OffsetBox-v0' not in gym.registry:
  gym.register('rl_test/OffsetBox-v0', entry_point=_OffsetBoxEnv)


@pytest.mark.parametrize('learn_std', [None, 'separate'])
def test_random_initial_box_actions_store_the_inputs_they_were_sampled_with(learn_std):
  """The stored dist_inputs of random trajectories are the density the actions came from.

  Off-policy losses (SamplingAWR's reweighting, probability ratios) read the
  behaviour policy from the stored inputs; inputs of 0 would claim N(0, std)
  for actions drawn around the middle of [4, 10].
  """
  gin.parse_config([f'Gaussian.learn_std = {learn_std!r}'])
  task = task_for('rl_test/OffsetBox-v0', initial_trajectories=40)
  trainer = AWR(task, **tiny())
  trainer.learner.collect_initial()
  data = task.epochs[0]
  real = data.rows['mask'] > 0
  actions = data.rows['action'][real]
  inputs = data.rows['dist_inputs'][real]
  assert len(actions) >= 800
  means, stds = trainer.policy.dist._split(inputs)
  z = (actions - np.asarray(means)) / np.asarray(stds)
  # Standardised by the stored inputs, the actions are N(0, 1) draws.
  assert abs(z.mean()) < 0.1 and abs(z.std() - 1.0) < 0.1, (z.mean(), z.std())
  np.testing.assert_allclose(np.asarray(means), 7.0)  # the middle of [4, 10]
  if learn_std:
    # As wide as the uniform distribution over the box.
    np.testing.assert_allclose(np.asarray(stds), 6.0 / math.sqrt(12.0), rtol=1e-5)


# -- 3. Q-values and their aggregates -----------------------------------------------------

@pytest.mark.parametrize('aggregate', q_values.AGGREGATES)
def test_q_value_aggregates_train_an_epoch(aggregate):
  # policy_eval_steps=0 skips compiling the policy metrics (the policy train
  # loss is still checked for finiteness): the aggregate only affects values.
  trainer = AWR(task_for('CartPole-v1'), q_value=True, q_value_n_samples=3,
                q_value_aggregate=aggregate, **tiny(policy_eval_steps=0))
  # 3 samples of 2 actions: sampled from the stored policy, not enumerated.
  assert not trainer.q_baseline.sample_all
  record = trainer.learner.run_epoch()
  assert math.isfinite(record['value_loss'])
  assert all(math.isfinite(v) for v in finite_numbers(record).values())


def first_value_batch(**kwargs):
  """One value batch of a fresh Q-value AWR after one collection (seeded: repeatable)."""
  trainer = AWR(task_for('CartPole-v1'), q_value=True, q_value_n_samples=3, **tiny(**kwargs))
  trainer.learner.collect(n_interactions=16)
  return batch_helpers.value_batch(trainer)


def test_old_boolean_alias_of_the_aggregate():
  # ValueBatch(observation, action, target, mask); the targets carry the aggregate.
  alias_max = first_value_batch(q_value_aggregate_max=True)
  explicit_max = first_value_batch(q_value_aggregate='max')
  alias_mean = first_value_batch(q_value_aggregate_max=False)
  for a, b in zip(alias_max, explicit_max):
    np.testing.assert_array_equal(a, b)
  # Same data, same keys: only the aggregate differs, and max >= mean of the
  # same Q samples, so 'max' targets can only be higher.
  np.testing.assert_array_equal(alias_max.observation, alias_mean.observation)
  assert not np.array_equal(alias_max.target, alias_mean.target)
  assert np.all(np.asarray(alias_max.target) >= np.asarray(alias_mean.target) - 1e-6)


# One state, three sampled actions with Q = [1, 2, 1] and policy probabilities
# [1/2, 1/4, 1/4]; arrays are [B=1, n=3, L=1].
Q = jnp.array([1.0, 2.0, 1.0]).reshape(1, 3, 1)
LOG_P = jnp.log(jnp.array([0.5, 0.25, 0.25])).reshape(1, 3, 1)
E = math.e
HAND_COMPUTED = {
    # max(1, 2, 1)
    'max': 2.0,
    # softmax weights e^q / (e + e^2 + e) = (1, e, 1) / (2 + e);
    # sum w q = (1 + 2e + 1) / (2 + e) = (2 + 2e) / (2 + e) ~ 1.5761
    'softmax': (2 + 2 * E) / (2 + E),
    # log(e + e^2 + e) - log 3 = 1 + log(2 + e) - log 3 ~ 1.4528
    'logsumexp': 1 + math.log(2 + E) - math.log(3),
    # samples already come from the policy: plain mean (1 + 2 + 1) / 3
    'mean': 4 / 3,
}


@pytest.mark.parametrize('mode', sorted(HAND_COMPUTED))
def test_aggregate_by_hand(mode):
  value = q_values.aggregate(Q, LOG_P, mode)
  assert value.shape == (1, 1)
  np.testing.assert_allclose(float(value[0, 0]), HAND_COMPUTED[mode], rtol=1e-6)


def test_aggregate_mean_over_all_actions_is_probability_weighted():
  # Enumerated actions are weighted by the policy: 1/2 * 1 + 1/4 * 2 + 1/4 * 1 = 1.25
  # (not the plain mean 4/3).
  value = q_values.aggregate(Q, LOG_P, 'mean', sample_all=True)
  np.testing.assert_allclose(float(value[0, 0]), 1.25, rtol=1e-6)


def test_aggregate_temperature():
  # T = 2: softmax weights e^(q/2) = (e^.5, e, e^.5);
  # logsumexp: 2 * (log(2 e^.5 + e) - log 3).
  soft = (2 * math.exp(0.5) + 2 * E) / (2 * math.exp(0.5) + E)
  lse = 2 * (math.log(2 * math.exp(0.5) + E) - math.log(3))
  np.testing.assert_allclose(float(q_values.aggregate(Q, LOG_P, 'softmax', 2.0)[0, 0]), soft,
                             rtol=1e-6)
  np.testing.assert_allclose(float(q_values.aggregate(Q, LOG_P, 'logsumexp', 2.0)[0, 0]),
                             lse, rtol=1e-6)


def test_aggregate_rejects_an_unknown_mode():
  with pytest.raises(ValueError, match='unknown q_value_aggregate'):
    q_values.aggregate(Q, LOG_P, 'median')


# -- 4. sampling every action -------------------------------------------------------------

def test_sampling_awr_enumerates_all_actions_when_n_samples_is_the_action_count():
  trainer = SamplingAWR(task_for('CartPole-v1'), q_value_n_samples=2, **tiny())
  assert trainer.q_baseline.sample_all
  record = trainer.learner.run_epoch()
  assert all(math.isfinite(v) for v in finite_numbers(record).values())
  # More samples than actions: drawn from the policy, with repeats.
  other = SamplingAWR(task_for('CartPole-v1'), q_value_n_samples=3, **tiny())
  assert not other.q_baseline.sample_all


# -- 5. bootstrapping margins and value targets -------------------------------------------

@pytest.mark.parametrize('estimator', [advantages.td_k, advantages.td_lambda, advantages.gae],
                         ids=['td_k', 'td_lambda', 'gae'])
def test_ppo_bootstraps_through_an_added_policy_slice(estimator):
  # No policy metrics (as above): the finite train loss already depends on the
  # estimator's advantages.
  trainer = PPO(task_for('CartPole-v1'), advantage_estimator=estimator,
                **tiny(max_slice_length=1, added_policy_slice_length=2, policy_eval_steps=0))
  record = trainer.learner.run_epoch()
  assert math.isfinite(record['train_policy_loss'])
  assert all(math.isfinite(v) for v in finite_numbers(record).values())
  # The margin rows only serve the estimator: the policy sees 1 step per slice.
  obs, actions, adv, old_dist_inputs, mask = batch_helpers.policy_batch(trainer)
  assert obs.shape == (4, 1, 4) and adv.shape == mask.shape == (4, 1)


def test_monte_carlo_value_targets_are_the_stored_returns():
  task = task_for('rl_test/Chain-v0', env_kwargs={'length': 3}, gamma=0.5)
  # Monte-Carlo returns are only taken on whole episodes.
  trainer = A2C(task, advantage_estimator=advantages.monte_carlo,
                **dict(TINY, added_policy_slice_length=0, n_interactions_per_epoch=None,
                       n_trajectories_per_epoch=2, value_batch_size=16))
  # 2 envs x 3 steps: each env plays exactly one whole episode.
  trainer.learner.collect(n_trajectories=2)
  obs, _, targets, mask = batch_helpers.value_batch(trainer)
  assert obs.shape == (16, 1, 1) and targets.shape == mask.shape == (16, 1)
  real = np.asarray(mask) > 0
  assert real.all()  # slices of length 1 start only on real steps
  # Rewards 1, 2, 3 at t = 0, 1, 2 with gamma 0.5:
  # G_2 = 3, G_1 = 2 + 0.5 * 3 = 3.5, G_0 = 1 + 0.5 * 3.5 = 2.75.
  by_hand = {0: 2.75, 1: 3.5, 2: 3.0}
  rows = task.epochs[1].rows
  stored = {int(o[0]): float(r) for o, r, m in
            zip(rows['observation'], rows['return_'], rows['mask']) if m}
  assert stored == by_hand
  t = np.asarray(obs)[:, 0, 0].astype(int)
  np.testing.assert_allclose(np.asarray(targets)[real],
                             np.array([stored[i] for i in t]), rtol=1e-6)


# -- 6. Gaussian policies -----------------------------------------------------------------

GAUSSIAN_TRAINERS = {
    'A2C': (A2C, {}),
    'PPO': (PPO, {}),
    'AWR': (AWR, {}),
    'SamplingAWR': (SamplingAWR, {'q_value_n_samples': 2}),
}


@pytest.fixture(scope='module')
def pendulum_records():
  """Two epochs of each trainer on Pendulum-v1 (Box actions), shared with the
  metric-name tests below so each trainer is compiled once."""
  records = {}
  for name, (cls, kwargs) in GAUSSIAN_TRAINERS.items():
    gin.clear_config()
    trainer = cls(task_for('Pendulum-v1'), **tiny(**kwargs))
    records[name] = [trainer.learner.run_epoch(), trainer.learner.run_epoch()]
    trainer.close()
  gin.clear_config()
  return records


@pytest.mark.parametrize('name', sorted(GAUSSIAN_TRAINERS))
def test_gaussian_policy_trains_two_epochs(pendulum_records, name):
  first, second = pendulum_records[name]
  assert second['epoch'] == 2 and second['env_steps'] == 32
  for record in (first, second):
    numbers = finite_numbers(record)
    assert 'value_loss' in numbers and 'policy_loss' in numbers
    bad = {k: v for k, v in numbers.items() if not math.isfinite(v)}
    assert not bad, f'{name}: non-finite metrics {bad}'


# -- 7. bad input at construction ---------------------------------------------------------

@pytest.mark.parametrize('cls', [PPO, A2C], ids=['PPO', 'A2C'])
def test_on_policy_trainers_reject_replay(cls):
  with pytest.raises(ConfigError, match='is on-policy: n_replay_epochs must be 1'):
    cls(task_for('CartPole-v1'), n_replay_epochs=2, **tiny())


def test_all_actions_needs_a_discrete_action_space():
  with pytest.raises(ConfigError, match='needs a Discrete action space'):
    AWR(task_for('Pendulum-v1'), q_value=True, q_value_n_samples='all', **tiny())


def test_unknown_q_value_aggregate():
  with pytest.raises(ConfigError, match="q_value_aggregate must be one of .*'median'"):
    AWR(task_for('CartPole-v1'), q_value=True, q_value_aggregate='median', **tiny())


@pytest.mark.parametrize('estimator', [advantages.td_lambda, advantages.gae, advantages.td_k],
                         ids=['td_lambda', 'gae', 'td_k'])
def test_bootstrapping_estimators_need_a_margin(estimator):
  with pytest.raises(ConfigError, match='added_policy_slice_length must be >= 1'):
    PPO(task_for('CartPole-v1'), advantage_estimator=estimator,
        **tiny(added_policy_slice_length=0))


def test_value_steps_must_split_evenly_into_evals():
  with pytest.raises(ConfigError, match=r'value_train_steps_per_epoch \(3\) must be a '
                     r'positive multiple of value_evals_per_epoch \(2\)'):
    A2C(task_for('CartPole-v1'), **tiny(value_train_steps_per_epoch=3,
                                        value_evals_per_epoch=2))


# Settings that could only fail inside an epoch are checked at construction, so
# the runner reports them before anything is written (rl/experiment.py).

def test_too_many_shared_layers_are_rejected_at_construction():
  with pytest.raises(ConfigError, match='n_shared_layers must be between 0 and 1'):
    A2C(task_for('CartPole-v1'), n_shared_layers=2, **tiny())


def test_zero_q_value_samples_are_rejected_at_construction():
  with pytest.raises(ConfigError, match='q_value_n_samples must be a positive integer'):
    AWR(task_for('CartPole-v1'), q_value=True, q_value_n_samples=0, **tiny())


def test_aggregate_and_its_old_alias_together_are_rejected():
  with pytest.raises(ConfigError, match='not both'):
    AWR(task_for('CartPole-v1'), q_value=True, q_value_aggregate='mean',
        q_value_aggregate_max=True, **tiny())


# -- 8. the logged losses -----------------------------------------------------------------

BASE_METRICS = {'policy_loss', 'advantage_mean', 'advantage_std', 'value_loss', 'value_mean'}
EXTRA_METRICS = {
    'A2C': set(),
    'PPO': {'clip_fraction', 'approximate_kl_divergence'},
    'AWR': {'awr_weight_mean', 'awr_weight_std', 'awr_weight_min', 'awr_weight_max'},
    'SamplingAWR': {'awr_weight_mean', 'awr_weight_std', 'awr_weight_min',
                    'awr_weight_max'},
}


@pytest.mark.parametrize('name', sorted(EXTRA_METRICS))
def test_epoch_logs_the_spec_metrics(pendulum_records, name):
  record = pendulum_records[name][0]
  missing = (BASE_METRICS | EXTRA_METRICS[name]) - set(record)
  assert not missing, f'{name} does not log {sorted(missing)}'
  # Weights are exp(A / beta) capped at w_max: positive, ordered, <= 20.
  if 'awr_weight_min' in EXTRA_METRICS[name]:
    assert 0 < record['awr_weight_min'] <= record['awr_weight_mean'] \
        <= record['awr_weight_max'] <= 20.0
  if name == 'PPO':
    assert 0.0 <= record['clip_fraction'] <= 1.0


def test_value_summaries_live_in_output_dir_value(tmp_path):
  from rl import experiment as run_lib
  config = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                        'configs', 'ppo_cartpole.gin')
  out = tmp_path / 'ppo'
  run_lib.execute([config], ['train_rl.n_epochs = 1', 'RLTask.n_envs = 2',
                             'MLP.layer_widths = (8,)'], str(out))
  assert os.listdir(out / 'value') and os.listdir(out / 'tensorboard')


def test_windowed_advantages_take_the_estimators_every_row_form():
  """With GAE, every stored row's advantage comes from `every_row`, not from
  [capacity, margin + 1] windows; both give the same numbers, padding included."""
  from rl.data import slices  # pylint: disable=import-outside-toplevel
  from rl.algorithms.actor_critic import windowed_advantages  # pylint: disable=import-outside-toplevel
  rng = np.random.default_rng(0)
  lengths = [5, 1, 9, 3]  # steps; each trajectory also has its final-observation row
  n = sum(lengths) + len(lengths)
  mask = np.concatenate([np.r_[np.ones(k, np.float32), 0.0] for k in lengths])
  dones = np.concatenate([np.r_[np.zeros(k - 1, np.float32), 1.0, 0.0] for k in lengths])
  rows = {'reward': rng.normal(size=n).astype(np.float32), 'done': dones, 'mask': mask,
          'return_': rng.normal(size=n).astype(np.float32)}
  starts = np.cumsum([0] + [k + 1 for k in lengths[:-1]]).astype(np.int32)
  data = slices.pad(rows, starts, np.array([k + 1 for k in lengths], np.int32))
  values = jnp.asarray(rng.normal(size=data.row_end.shape[0]).astype(np.float32))
  estimator = advantages.gae(0.99, 4, 0.9)
  assert hasattr(estimator, 'every_row')
  windowed = lambda *args: estimator(*args)  # noqa: E731  (the same estimator, windows only)
  np.testing.assert_allclose(windowed_advantages(data, values, estimator, 4),
                             windowed_advantages(data, values, windowed, 4), atol=1e-5)
