"""RLTask: the backends, the storage the trainer declares, collection counts, stored rows,
truncation, replay, slices, resume state."""
import threading

import gin
import gymnasium as gym
import numpy as np
import pytest
from conftest import ChainEnv

from rl import config
from rl.envs import vector_envs
from rl.envs import task as task_lib
from rl.envs.gym_task import GymTask
from rl.envs.jax_task import JaxTask
from rl.errors import ConfigError
from rl.envs.task import RLTask
from rl.envs.task import TaskNeeds
from task_helpers import built_task
from task_helpers import sample_batch


def constant_policy(action=0, k=1):
  def policy(obs):
    n = obs.shape[0]
    return np.full(n, action, np.int64), np.full((n, k), 0.5, np.float32)
  return policy


def chain_task(**kwargs):
  args = dict(env='rl_test/Chain-v0', n_envs=2, gamma=0.5, seed=0)
  args.update(kwargs)
  return built_task(**args)


def trajectories(data):
  for start, rows in zip(data.traj_start, data.traj_rows):
    yield {k: v[start:start + rows] for k, v in data.rows.items()}


# -- the backends and the storage the trainer declares ------------------------------------

def test_the_env_id_picks_the_backend_and_both_implement_the_task_interface():
  pytest.importorskip('gymnax')
  members = [name for name in dir(task_lib.Task) if not name.startswith('_')]
  members += list(task_lib.Task.__annotations__)
  for env, backend in (('CartPole-v1', GymTask), ('gymnax:CartPole-v1', JaxTask)):
    task = RLTask(env=env, n_envs=2)
    assert type(task) is backend and task.needs is None
    assert [m for m in members if not hasattr(task, m)] == [], backend
    task.build_storage(TaskNeeds(n_replay_epochs=2, steps_per_epoch=4))
    assert task.needs.n_replay_epochs == 2
    with pytest.raises(RuntimeError, match='build_storage is called once'):
      task.build_storage(TaskNeeds())
    task.close()


def test_nothing_is_collected_before_the_storage_is_built():
  task = RLTask(env='rl_test/Chain-v0', n_envs=2)
  with pytest.raises(RuntimeError, match=r'build_storage\(TaskNeeds'):
    task.collect(constant_policy(), n_trajectories=1)


def test_a_replay_of_no_epochs_is_refused_in_one_line():
  task = RLTask(env='rl_test/Chain-v0', n_envs=2)
  with pytest.raises(ConfigError, match="n_replay_epochs must be >= 1, got 0; fix the trainer's"):
    task.build_storage(TaskNeeds(n_replay_epochs=0))


def test_the_reserved_rows_pad_the_device_copy_from_the_first_epoch():
  task = RLTask(env='rl_test/Chain-v0', n_envs=2)
  task.build_storage(TaskNeeds(reserved_rows=5000))
  task.collect(constant_policy(), n_trajectories=2)
  assert len(task.slice_data().row_end) == 8192  # the capacity bucket of 5,000 rows


def test_n_replay_epochs_is_the_trainers_not_the_tasks():
  """RLTask has no n_replay_epochs: gin refuses the binding, and the fix names the trainer's."""
  with pytest.raises(ConfigError, match=r'bind <Trainer>.n_replay_epochs \(e.g. DQN'):
    config.parse_config([], ['RLTask.n_replay_epochs = 3'])
  gin.clear_config()
  # With the trainer bound (a config file, then --config), the line names it.
  with pytest.raises(ConfigError, match='bind PPO.n_replay_epochs instead of RLTask'):
    config.parse_config([], ['train_rl.trainer_class = @PPO', 'RLTask.n_replay_epochs = 3'])
  gin.clear_config()
  assert task_lib.misplaced_binding('n_replay_epochs', 'DQN') == (
      'n_replay_epochs is a trainer parameter: bind DQN.n_replay_epochs instead of '
      'RLTask.n_replay_epochs.')
  assert '<Trainer>.n_replay_epochs (e.g. DQN.n_replay_epochs)' in task_lib.misplaced_binding(
      'n_replay_epochs')
  assert task_lib.misplaced_binding('gama') is None


# -- collection and the stored rows ------------------------------------------------------

def test_stored_rows_of_a_terminated_episode():
  task = chain_task(env_kwargs={'length': 3})
  task.collect(constant_policy(), n_trajectories=2, epoch_id=1)
  traj = next(trajectories(task.epochs[1]))
  # 3 steps and the final observation: rows t=0..3.
  np.testing.assert_array_equal(traj['observation'][:, 0], [0, 1, 2, 3])
  np.testing.assert_array_equal(traj['reward'], [1, 2, 3, 0])
  np.testing.assert_array_equal(traj['mask'], [1, 1, 1, 0])
  np.testing.assert_array_equal(traj['done'], [0, 0, 1, 0])
  # Discounted returns with gamma 0.5: G2 = 3, G1 = 2 + 1.5, G0 = 1 + 1.75.
  np.testing.assert_allclose(traj['return_'], [2.75, 3.5, 3.0, 0.0])
  np.testing.assert_allclose(traj['dist_inputs'][:3], 0.5)


def test_truncation_is_not_termination():
  task = chain_task(env_kwargs={'terminate': False}, time_limit=4)
  task.collect(constant_policy(), n_trajectories=2, epoch_id=1)
  for traj in trajectories(task.epochs[1]):
    np.testing.assert_array_equal(traj['mask'], [1, 1, 1, 1, 0])
    np.testing.assert_array_equal(traj['done'], 0)  # truncated: bootstrap later
    assert traj['observation'][-1, 0] == 4  # the final observation, not the reset one


def test_interaction_counts_are_exact_and_episodes_carry_over():
  task = chain_task(env_kwargs={'length': 5}, n_envs=2)
  stats = task.collect(constant_policy(), n_interactions=6, epoch_id=1)
  assert stats['env_steps'] == 6 and task.n_interactions == 6
  # Each env did 3 steps of a 5-step episode: stored cut (not done), 3 real rows.
  for traj in trajectories(task.epochs[1]):
    np.testing.assert_array_equal(traj['mask'], [1, 1, 1, 0])
    np.testing.assert_array_equal(traj['done'], 0)
  task.collect(constant_policy(), n_interactions=4, epoch_id=2)
  assert task.n_interactions == 10
  for traj in trajectories(task.epochs[2]):
    # The episode continued from t=3 and terminated at t=5.
    np.testing.assert_array_equal(traj['observation'][:, 0], [3, 4, 5])
    np.testing.assert_array_equal(traj['done'], [0, 1, 0])


def test_n_interactions_must_divide_by_n_envs():
  task = chain_task(n_envs=4)
  with pytest.raises(ConfigError, match='multiple of RLTask.n_envs'):
    task.collect(constant_policy(), n_interactions=6)


def test_max_steps_cuts_long_episodes_into_segments():
  task = chain_task(env_kwargs={'length': 7}, max_steps=3, n_envs=1)
  task.collect(constant_policy(), n_trajectories=3, epoch_id=1)
  segments = list(trajectories(task.epochs[1]))
  np.testing.assert_array_equal([len(s['mask']) - 1 for s in segments], [3, 3, 1])
  np.testing.assert_array_equal(segments[1]['observation'][:, 0], [3, 4, 5, 6])
  np.testing.assert_array_equal([s['done'].max() for s in segments], [0, 0, 1])


def test_replay_keeps_exactly_n_epochs():
  task = chain_task(n_replay_epochs=2)
  for epoch in range(1, 5):
    task.collect(constant_policy(), n_trajectories=2, epoch_id=epoch)
    assert sorted(task.epochs) == list(range(max(1, epoch - 1), epoch + 1))


def test_slices_are_padded_to_a_static_length():
  task = chain_task(env_kwargs={'length': 3})
  task.collect(constant_policy(), n_trajectories=4, epoch_id=1)
  batch = sample_batch(task, 16, max_slice_length=3, margin=1)
  assert batch.observation.shape == (16, 3, 1)
  assert batch.action.shape == (16, 3) and batch.mask.shape == (16, 3)
  # A 3-step trajectory has 4 rows, hence 4 + 1 - 3 = 2 starts with margin 1.
  first = batch.observation[:, 0, 0]
  assert set(first) <= {0.0, 1.0}
  whole = sample_batch(task, 4, max_slice_length=None)
  assert whole.observation.shape == (4, 4, 1)  # 4 rows, already a power of two
  long = sample_batch(task, 4, max_slice_length=2, min_slice_length=6)
  assert long.mask.shape == (4, 6)
  np.testing.assert_array_equal(long.mask[:, 2:], 0)


def test_padding_rows_are_zero_with_mask_zero():
  task = chain_task(env_kwargs={'length': 2})
  task.collect(constant_policy(), n_trajectories=2, epoch_id=1)
  batch = sample_batch(task, 8, max_slice_length=None, min_slice_length=5)
  np.testing.assert_array_equal(batch.mask, np.tile([1, 1, 0, 0, 0], (8, 1)))
  np.testing.assert_array_equal(batch.reward[:, 2:], 0)
  np.testing.assert_array_equal(batch.observation[:, 3:], 0)


def test_epochs_minus_one_follows_the_newest_epoch():
  task = chain_task(env_kwargs={'length': 2}, n_replay_epochs=3)
  task.collect(constant_policy(action=0), n_trajectories=2, epoch_id=1)
  task.collect(constant_policy(action=1), n_trajectories=2, epoch_id=2)
  batch = sample_batch(task, 32, epochs=[-1], max_slice_length=1)
  np.testing.assert_array_equal(batch.action[batch.mask > 0], 1)
  both = sample_batch(task, 256, epochs=None, max_slice_length=1)
  assert set(both.action[both.mask > 0]) == {0, 1}


def test_sampling_by_slices_favours_long_trajectories():
  task = chain_task(env_kwargs={'length': 1}, n_envs=1)
  task.collect(constant_policy(), n_trajectories=1, epoch_id=1)
  task._env.envs[0].unwrapped._length = 9  # pylint: disable=protected-access
  task.collect(constant_policy(), n_trajectories=1, epoch_id=1)
  by_slice = sample_batch(task, 4000, max_slice_length=1)
  # 1 slice in the short trajectory, 9 in the long one: 10% vs 50% uniformly.
  short_share = np.mean(by_slice.observation[:, 0, 0] == 0)
  uniform = sample_batch(task, 4000, max_slice_length=1, sample_trajectories_uniformly=True,
                         seed=1)
  assert 0.15 < short_share < 0.25  # 0.1 (short) + 0.9 * 1/9 (t=0 of the long one)
  assert np.mean(uniform.observation[:, 0, 0] == 0) > 0.5


def test_state_round_trip_continues_identically():
  def fresh():
    return built_task(env='CartPole-v1', n_envs=3, seed=7, n_replay_epochs=2)
  rng = np.random.default_rng(0)
  actions = rng.integers(0, 2, size=(400, 3))
  def policy_from(offset):
    counter = {'i': offset}
    def policy(obs):
      a = actions[counter['i']]
      counter['i'] += 1
      return a, np.zeros((3, 1), np.float32)
    return policy
  a = fresh()
  a.collect(policy_from(0), n_interactions=60, epoch_id=1)
  arrays, meta = a.state_dict()
  b = fresh()
  b.load_state_dict(arrays, meta)
  a.collect(policy_from(20), n_interactions=90, epoch_id=2)
  b.collect(policy_from(20), n_interactions=90, epoch_id=2)
  for epoch in (1, 2):
    for field in a.epochs[epoch].rows:
      np.testing.assert_array_equal(a.epochs[epoch].rows[field], b.epochs[epoch].rows[field])
  np.testing.assert_array_equal(sample_batch(a, 8, max_slice_length=2).observation,
                                sample_batch(b, 8, max_slice_length=2).observation)


def test_evaluation_is_reproducible_and_separate():
  task = chain_task(env_kwargs={'length': 4}, n_envs=2)
  returns = task.evaluate(constant_policy(), n_episodes=3, reset_seed=5)
  np.testing.assert_array_equal(returns, [10, 10, 10])  # 1 + 2 + 3 + 4
  assert task.n_interactions == 0  # eval envs are separate and uncounted


def test_unknown_env_id_suggests_the_closest():
  with pytest.raises(ConfigError, match="Did you mean 'CartPole-v1'"):
    RLTask(env='CartPole-v9')


def test_random_initial_trajectories_fill_epoch_zero():
  task = chain_task(initial_trajectories=3)
  task.collect_initial()
  assert task.epochs[0].n_trajectories >= 3


def test_running_buffers_grow_for_envs_without_a_step_cap():
  # No time limit and no max_steps: a 2,500-step episode outgrows the initial
  # 1,000-step ring twice and must come out whole and in order.
  task = chain_task(env_kwargs={'length': 2500}, n_envs=2)
  task.collect(constant_policy(), n_trajectories=2, epoch_id=1)
  for traj in trajectories(task.epochs[1]):
    np.testing.assert_array_equal(traj['observation'][:, 0], np.arange(2501))
    np.testing.assert_array_equal(traj['reward'][:-1], np.arange(1, 2501))


def test_running_buffers_start_small_under_a_long_step_cap_and_grow():
  # A 3,000-step time limit: the ring starts at 1,024 rows (+ 1) per env, not
  # the cap's, and grows as the 2,500-step episodes get longer.
  task = chain_task(env_kwargs={'length': 2500}, n_envs=2, time_limit=3000)
  assert task.storage.segments.size == 1025
  task.collect(constant_policy(), n_trajectories=2, epoch_id=1)
  assert task.storage.segments.size == 4100
  for traj in trajectories(task.epochs[1]):
    np.testing.assert_array_equal(traj['observation'][:, 0], np.arange(2501))


class _UnpicklableChainEnv(ChainEnv):
  """A Chain env that cannot be pickled (it holds a lock), like some simulators.

  Every seeded reset is recorded, so a test can see what the envs were reset with.
  """

  reset_seeds = []

  def __init__(self, **kwargs):
    super().__init__(**kwargs)
    self._lock = threading.Lock()

  def reset(self, *, seed=None, options=None):
    if seed is not None:
      _UnpicklableChainEnv.reset_seeds.append(seed)
    return super().reset(seed=seed, options=options)


if 'rl_test/UnpicklableChain-v0' not in gym.registry:
  gym.register('rl_test/UnpicklableChain-v0', entry_point=_UnpicklableChainEnv)


def test_resume_of_an_unpicklable_env_restarts_its_episodes_cleanly():
  """Without the envs' own state the running episodes are dropped, not spliced.

  The envs cannot be restored mid-episode, so they are reset on resume; a
  running segment kept from the checkpoint would join an old observation to
  the new episode's first step. The resumed task must start every env's next
  trajectory at the reset observation, seed that reset from the restored
  counters (not from the seed alone, which every resume would repeat), and
  say that the resume is not bit-exact.
  """
  def fresh():
    return chain_task(env='rl_test/UnpicklableChain-v0', env_kwargs={'length': 5}, n_envs=2)
  a = fresh()
  # 3 steps of 5-step episodes: a trajectory is still running in each env at
  # the end of the epoch, and it still is at the checkpoint.
  a.collect(constant_policy(), n_interactions=6, epoch_id=1)
  arrays, meta = a.state_dict()
  assert 'env_state' not in arrays
  assert a.resume_warning is None

  _UnpicklableChainEnv.reset_seeds.clear()
  b = fresh()
  b.load_state_dict(arrays, meta)
  assert b.n_interactions == 6
  assert b.resume_warning is not None and 'not bit-exact' in b.resume_warning
  # Reset once after construction (seed 0) and once on the resume, seeded
  # from the restored step count, so no two resumes repeat the same seed.
  assert len(_UnpicklableChainEnv.reset_seeds) >= 2
  resume_seed = _UnpicklableChainEnv.reset_seeds[-1]
  assert resume_seed != b.seed

  b.collect(constant_policy(), n_trajectories=2, epoch_id=2)
  for traj in trajectories(b.epochs[2]):
    real = traj['mask'] > 0
    # A whole episode from its reset: observations 0, 1, ..., 5, nothing older.
    np.testing.assert_array_equal(traj['observation'][:, 0], np.arange(real.sum() + 1))
    np.testing.assert_array_equal(traj['reward'][real], np.arange(1, real.sum() + 1))
  # Episode returns count whole episodes only (1 + 2 + 3 + 4 + 5).
  stats = b.collect(constant_policy(), n_trajectories=2, epoch_id=3)
  assert all(r == 15 for r in stats['episode_returns'])


def test_cartpole_evaluates_on_its_own_vectorised_env_and_trains_on_copies():
  """Evaluation plays CartPole on gymnasium's CartPoleVectorEnv (one numpy step for all
  episodes), reproducibly from its seed; training collection keeps one env per copy, whose
  state a checkpoint saves."""
  from gymnasium.envs.classic_control.cartpole import CartPoleVectorEnv  # pylint: disable=import-outside-toplevel
  vectorized = vector_envs.make_vector_env('CartPole-v1', 3, vectorized=True)
  assert isinstance(vectorized.unwrapped, CartPoleVectorEnv)
  assert isinstance(vector_envs.make_vector_env('CartPole-v1', 3).unwrapped, gym.vector.SyncVectorEnv)
  # A wrapper on every copy needs the copies one by one.
  wrapped = vector_envs.make_vector_env('CartPole-v1', 3, vectorized=True,
                                     wrappers=[gym.wrappers.RecordEpisodeStatistics])
  assert isinstance(wrapped.unwrapped, gym.vector.SyncVectorEnv)
  task = RLTask(env='CartPole-v1', n_envs=2)
  policy = lambda obs: ((obs[:, 2] > 0).astype(np.int64), None)  # a poor balancing rule
  first = task.evaluate(policy, n_episodes=4, reset_seed=7)
  np.testing.assert_array_equal(first, task.evaluate(policy, n_episodes=4, reset_seed=7))
  assert len(set(first.tolist())) > 1 and all(8 <= r <= 500 for r in first)
  assert isinstance(task._eval_envs[4].unwrapped, CartPoleVectorEnv)  # pylint: disable=protected-access


def test_the_env_modules_import_no_cycle_and_nothing_above_them():
  """rl.envs and rl.data import each other one way only, and nothing of the learner's."""
  import ast  # pylint: disable=import-outside-toplevel
  import pathlib  # pylint: disable=import-outside-toplevel
  root = pathlib.Path(task_lib.__file__).parents[2]
  graph = {}
  for package in ('envs', 'data'):
    for path in (root / 'rl' / package).glob('*.py'):
      imported = set()
      for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith('rl'):
          imported |= {f'{node.module}.{a.name}' for a in node.names} | {node.module}
        elif isinstance(node, ast.Import):
          imported |= {a.name for a in node.names if a.name.startswith('rl')}
      graph[f'rl.{package}.{path.stem}'] = imported
  higher = ('rl.learner', 'rl.algorithms', 'rl.run', 'rl.seeds', 'rl.evaluate')
  assert {m: sorted(i for i in imports if i.startswith(higher))
          for m, imports in graph.items() if any(i.startswith(higher) for i in imports)} == {}
  edges = {m: {i for i in imports if i in graph} for m, imports in graph.items()}
  done, path = set(), []

  def visit(module):
    assert module not in path, f'import cycle: {path[path.index(module):] + [module]}'
    if module not in done:
      path.append(module)
      for other in edges[module]:
        visit(other)
      path.pop()
      done.add(module)
  for module in edges:
    visit(module)
