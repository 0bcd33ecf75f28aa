"""RLTask: collection on a gymnasium vector env, the per-epoch replay buffer, slices.

Data layout. A stored trajectory of T steps occupies T + 1 consecutive *rows*:
rows 0..T-1 are its steps (observation at the start of the step, action,
reward, dist_inputs of the acting policy, discounted return, done, mask=1), and
row T holds the final observation with mask=0 and zeros elsewhere. `done` is
gymnasium's `terminated` only: a time-limit truncation or a cut at `max_steps`
leaves done=0 so that value-based estimators bootstrap from the final
observation's value (the episode goes on in the world, only our record of it
stops; treating it as an end would teach the value net that the state is
worth nothing more). All trajectories of an epoch
live in flat numpy arrays with `traj_start` offsets, so slices of many
trajectories are gathered with one fancy-indexing operation per field.

Stacked observations (num_stacked_frames > 1) are stored one frame per row,
plus a few context frames per trajectory (rl.data.frames), and rebuilt on the
device whenever rows are gathered (rl.data.slices): a step of 84x84x4 Atari
observations costs one 84x84 frame, not four. Acting still sees the env's
stacked observations.

Collection. All `n_envs` envs step together with one batched policy call per
step. Episodes that are still running when an epoch's quota is met carry over
to the next epoch (their data stays in the running buffers), so no episode is
dropped and short episodes are not favoured.
"""
import collections
import contextlib
import os
import tempfile
import warnings

import gin
import gymnasium as gym
import jax
import numpy as np

from rl import compiler
from rl.envs import registry as envs_lib
from rl.data import frames as frames_lib
from rl.envs import gymnax_envs as jax_envs
from rl import keys
from rl.data import slices
from rl.envs import wrappers as wrappers_lib
from rl.ops.advantages import discounted_returns
from rl.errors import ConfigError

# The fields of a batch of slices, each shaped [B, L, ...].
Batch = collections.namedtuple(
    'Batch', ['observation', 'action', 'reward', 'done', 'mask', 'dist_inputs', 'return_'])

_ROW_FIELDS = Batch._fields

_sample_jit = compiler.jit(slices.sample, static_argnums=(2, 3, 4, 5, 6))

# Observations are stored in fixed-shape arrays and fed to the networks as
# such; composite spaces (Tuple, Dict, ...) have no array shape.
OBSERVATION_SPACES = (gym.spaces.Box, gym.spaces.Discrete, gym.spaces.MultiDiscrete,
                      gym.spaces.MultiBinary)

# Rows per env the running segments start with. They grow when a segment
# gets longer: an episode cap can be tens of thousands of steps that few
# segments reach, and preallocating it for every env would cost gigabytes of
# Atari frames. Every shipped config's cap fits, so their buffers never grow.
_INITIAL_SEGMENT_ROWS = 1024


class EpochData:
  """The trajectories of one epoch, as flat row arrays plus offsets.

  With stacked observations stored as frames (rl.data.frames), rows['observation']
  holds each row's newest frame, `context` [K, *frame] the trajectories'
  context frames in trajectory order and `traj_context` [n] how many of
  them each trajectory has; without stacking both are None.
  """

  def __init__(self, rows, traj_start, traj_rows, context=None, traj_context=None):
    self.rows = rows  # dict field -> [R, ...]
    self.traj_start = traj_start  # [n] first row of each trajectory
    self.traj_rows = traj_rows  # [n] rows of each trajectory (steps + 1)
    self.context = context
    self.traj_context = traj_context

  @property
  def n_trajectories(self):
    return len(self.traj_start)

  @property
  def n_steps(self):
    return int(self.rows['mask'].sum())

  @classmethod
  def concatenate(cls, parts):
    if len(parts) == 1:
      return parts[0]
    offsets = np.cumsum([0] + [len(p.rows['mask']) for p in parts[:-1]])
    rows = {f: np.concatenate([p.rows[f] for p in parts]) for f in _ROW_FIELDS}
    starts = np.concatenate([p.traj_start + o for p, o in zip(parts, offsets)])
    context = traj_context = None
    if parts[0].context is not None:
      context = np.concatenate([p.context for p in parts])
      traj_context = np.concatenate([p.traj_context for p in parts])
    return cls(rows, starts, np.concatenate([p.traj_rows for p in parts]), context,
               traj_context)

  @property
  def nbytes(self):
    """Bytes of all its arrays."""
    return sum(v.nbytes for v in self.state().values())

  def state(self):
    state = dict(self.rows, traj_start=self.traj_start, traj_rows=self.traj_rows)
    if self.context is not None:
      state.update(context=self.context, traj_context=self.traj_context)
    return state

  @classmethod
  def from_state(cls, state):
    context = traj_context = None
    if 'traj_context' in state:
      context = np.asarray(state['context'])
      traj_context = np.asarray(state['traj_context'])
    return cls({f: np.asarray(state[f]) for f in _ROW_FIELDS},
               np.asarray(state['traj_start']), np.asarray(state['traj_rows']), context,
               traj_context)


class _RunningSegments:
  """The trajectory segments being collected right now, in time-major ring buffers.

  Row `k % size` holds every env's data of global vector step k, so each step
  is a few contiguous row writes (per-env scattered writes cost several times
  more in the collect loop). Env j's running segment spans global steps
  start[j] .. step; it is gathered only when it is flushed. `size` exceeds the
  longest running segment (the task grows the ring before one would wrap),
  so no segment is overwritten while it runs.

  With stacked observations `obs` holds each step's newest frame and
  `context[j]` the older frames of the observation that env j's running
  segment started with (rl.data.frames); else `obs` holds the observations and
  `context` is None.
  """

  def __init__(self, n_envs, capacity, frame_space, act_shape, act_dtype, n_dist_inputs,
               context_shape=None):
    size = capacity + 1
    self.step = 0
    self.start = np.zeros(n_envs, np.int64)
    self.obs = np.zeros((size, n_envs) + frame_space.shape, frame_space.dtype)
    self.action = np.zeros((size, n_envs) + tuple(act_shape), act_dtype)
    self.reward = np.zeros((size, n_envs), np.float32)
    self.dist_inputs = np.zeros((size, n_envs, n_dist_inputs), np.float32)
    self.context = None
    if context_shape is not None:
      self.context = np.zeros((n_envs,) + tuple(context_shape), frame_space.dtype)

  @property
  def size(self):
    return self.obs.shape[0]

  @property
  def length(self):
    """Steps in each env's running segment."""
    return self.step - self.start

  def rows(self, j):
    """Ring rows of env j's segment: its steps and the observation after the last."""
    return (self.start[j] + np.arange(self.step - self.start[j] + 1)) % self.size

  def grow(self):
    """Doubles the ring, keeping every live row."""
    old, new = self.size, 2 * self.size
    live = np.arange(max(0, self.step - old + 1), self.step + 1)
    for name in ('obs', 'action', 'reward', 'dist_inputs'):
      buf = getattr(self, name)
      grown = np.zeros((new,) + buf.shape[1:], buf.dtype)
      grown[live % new] = buf[live % old]
      setattr(self, name, grown)

  def state(self):
    state = {'step': np.array(self.step), 'start': self.start, 'obs': self.obs,
             'action': self.action, 'reward': self.reward, 'dist_inputs': self.dist_inputs}
    if self.context is not None:
      state['context'] = self.context
    return state

  def load_state(self, state):
    self.step = int(state['step'])
    names = ('start', 'obs', 'action', 'reward', 'dist_inputs')
    for name in names + (('context',) if self.context is not None else ()):
      setattr(self, name, np.array(state[name]))


@gin.configurable(denylist=['dist_inputs_size'])
class RLTask:
  """An environment, the collected trajectories and the sampling of slices.

  jax_native: False here; True for the JAX-native task (rl.envs.jax_task).

  Args:
    env: gymnasium env id, e.g. 'CartPole-v1', or a JAX-native env
      'gymnax:<id>' (e.g. 'gymnax:CartPole-v1'; rl.envs.jax_task), whose whole
      epoch of collection and training is one compiled call.
    env_kwargs: extra keyword arguments for `gymnasium.make` (a dict).
    n_envs: how many envs step together in the training vector env; one
      batched policy call serves all of them.
    gamma: discount factor for the stored returns and the advantage estimators.
    max_steps: longest stored trajectory segment; a longer episode is stored
      as several segments, each cut one bootstrapping from its final
      observation. None: whole episodes.
    time_limit: episode length after which gymnasium truncates (overrides the
      env's registered limit). None: the env's own limit.
    initial_trajectories: random-policy trajectories collected into epoch 0
      before training (useful for off-policy trainers; 0 = none).
    num_stacked_frames: each observation is the env's last this many frames
      (observations), concatenated on their last axis: 84x84x1 Atari frames
      give 84x84x4 with 4. The first observation of an episode fills the
      stack. Any env with Box observations; 1 = no stacking. The buffers
      store each frame once and rebuild the stacks when rows are gathered
      (rl.data.frames).
    atari_preprocessing: wrap every env (training and eval) in the Atari
      preprocessing that the gin configurable `atari_preprocessing` sets up
      (no-op starts, frame skip 4 with the ALE env made with frameskip=1,
      max-pool over the last two frames, 84x84x1 grayscale uint8, and for
      training only reward clipping and optionally episodes that end on a
      lost life); for ALE envs. `time_limit` then counts agent steps. The
      logged train and eval returns stay the games' unclipped scores.
    n_replay_epochs: how many of the latest epochs the buffer keeps.
    seed: seeds env resets, random actions and slice sampling; trainers derive
      their keys from it too. Same seed and config give the same numbers.
    dist_inputs_size: set by the trainer (width of the stored policy outputs).
  """

  jax_native = False

  def __init__(self, env=gin.REQUIRED, env_kwargs=None, n_envs=8, gamma=0.99,
               max_steps=None, time_limit=None, initial_trajectories=0,
               num_stacked_frames=1, atari_preprocessing=False,
               n_replay_epochs=1, seed=0, dist_inputs_size=1):
    if jax_envs.is_jax_env(env):
      # The same bindings, the other backend: this object becomes the
      # JAX-native task (rl.envs.jax_task), whose envs live on the device.
      from rl.envs import jax_task  # pylint: disable=import-outside-toplevel
      self.__class__ = jax_task.JaxTask
      self._setup_jax(env, env_kwargs, n_envs, gamma, max_steps, time_limit,
                      initial_trajectories, num_stacked_frames, atari_preprocessing,
                      n_replay_epochs, seed, dist_inputs_size)
      return
    envs_lib.check_env_id(env)
    if isinstance(num_stacked_frames, bool) or not isinstance(num_stacked_frames, int) or (
        num_stacked_frames < 1):
      raise ConfigError(f'RLTask.num_stacked_frames must be an integer >= 1 (1: no stacking), '
                        f'got {num_stacked_frames!r}.')
    if n_envs < 1:
      raise ConfigError(f'RLTask.n_envs must be >= 1, got {n_envs}.')
    if n_replay_epochs < 1:
      raise ConfigError(f'RLTask.n_replay_epochs must be >= 1, got {n_replay_epochs}.')
    self.env_name = env
    self._env_kwargs = dict(env_kwargs or {})
    self.n_envs = int(n_envs)
    self.gamma = float(gamma)
    self.max_steps = max_steps
    self.time_limit = time_limit
    self.seed = int(seed)
    self._n_replay_epochs = int(n_replay_epochs)
    self._initial_trajectories = int(initial_trajectories)
    self._rng = np.random.default_rng(np.random.SeedSequence([self.seed, 0]))
    self.num_stacked_frames = num_stacked_frames
    self._atari = wrappers_lib.atari_preprocessing() if atari_preprocessing else None
    if self._atari is not None:
      self._env_kwargs = wrappers_lib.atari_env_kwargs(env, self._env_kwargs)

    self._env, self._game_returns = self._make_env(self.n_envs, training=True)
    self.observation_space = self._env.single_observation_space
    # The space of one frame: where frames are stacked, the top wrapper's.
    self.frame_observation_space = getattr(
        self._env.envs[0], 'frame_space', self.observation_space)
    if not isinstance(self.observation_space, OBSERVATION_SPACES):
      self._env.close()
      supported = ', '.join(space.__name__ for space in OBSERVATION_SPACES)
      raise ConfigError(
          f'env {env!r} has the observation space {self.observation_space}, which is not '
          f'supported (supported: {supported}); pick another env, or register one whose '
          'observations are flattened (gymnasium.wrappers.FlattenObservation).')
    # What a step stores of its observation: the newest frame when stacked.
    self._frame_channels = None
    if num_stacked_frames > 1:
      self._frame_channels = self.frame_observation_space.shape[-1]
    self.action_space = self._env.single_action_space
    spec_limit = self._env.envs[0].spec.max_episode_steps if self._env.envs[0].spec else None
    self._episode_cap = time_limit or spec_limit
    self._eval_envs = {}

    self.epochs = {}  # epoch id -> EpochData
    self.n_interactions = 0
    self.n_trajectories = 0
    self.n_episodes = 0
    self._dist_inputs_size = int(dist_inputs_size)
    self._segments = None
    self._obs = None
    self._episode_return = np.zeros(self.n_envs, np.float64)
    self._device_cache = {}
    self._reserved_rows = 0
    # Set when a resume could not restore the envs exactly (said in the run's log).
    self.resume_warning = None

  # -- setup ------------------------------------------------------------------

  def _make_env(self, n_envs, training, video_folder=None):
    """A vector env of `n_envs` wrapped envs, and whether it reports game returns in its infos.

    Training and eval envs differ in the training-only wrappers (reward
    clipping, episodes ending on a lost life; see rl.envs.wrappers), and eval envs
    use the env's own vectorised implementation where it has one
    (rl.envs.registry.make_vector_env's `vectorized`; recorded or not, the same).
    """
    wrappers, game_returns = wrappers_lib.env_wrappers(
        self._atari, self.num_stacked_frames, training, self.time_limit)
    # Under Atari preprocessing the time limit is a wrapper above the frame
    # skip, so it counts agent steps as everything else here does.
    time_limit = None if self._atari is not None else self.time_limit
    env = envs_lib.make_vector_env(self.env_name, n_envs, self._env_kwargs, time_limit,
                                   video_folder=video_folder, wrappers=wrappers,
                                   vectorized=not training)
    return env, game_returns

  def share_programs(self, other):
    """Uses `other`'s compiled functions where it has any (a task of the same config)."""
    del other  # the gymnasium task compiles nothing of its own

  def set_dist_inputs_size(self, size):
    """Called by the trainer once it knows its policy's output width."""
    if self._segments is not None and size != self._dist_inputs_size:
      raise RuntimeError('dist_inputs_size must be set before collection starts')
    self._dist_inputs_size = int(size)

  def set_n_replay_epochs(self, n):
    self._n_replay_epochs = int(n)

  @property
  def n_replay_epochs(self):
    return self._n_replay_epochs

  def reserve_rows(self, n_rows):
    """Pads the device buffers (slice_data) to at least `n_rows` rows from the start.

    A replay buffer that fills over a run would otherwise pass through
    several capacity buckets, and the training epoch that reads it would
    compile once for each; reserved, it compiles once.
    """
    self._reserved_rows = int(n_rows)
    self._device_cache = {}

  def _ensure_started(self):
    if self._segments is not None:
      return
    cap = self.max_steps or self._episode_cap
    capacity = min(int(cap or 1000), _INITIAL_SEGMENT_ROWS)
    # Under a cap that the ring holds every segment is flushed by the time it
    # fills the ring, and the collect loop skips the check.
    self._may_grow = not cap or cap > capacity
    act_shape = self.action_space.shape or ()
    context_shape = None
    if self._frame_channels is not None:
      shape = self.observation_space.shape
      context_shape = shape[:-1] + (shape[-1] - self._frame_channels,)
    self._segments = _RunningSegments(
        self.n_envs, capacity, self.frame_observation_space, act_shape,
        self.action_space.dtype, self._dist_inputs_size, context_shape)
    space = self.action_space
    self._clip = (space.low, space.high) if hasattr(space, 'low') else None
    obs, _ = self._env.reset(seed=self.seed)
    self._obs = obs
    self._segments.obs[0] = self._frame(obs)
    self._begin_segments(slice(None), obs)

  def _frame(self, obs):
    """What the running segments store of observations: the newest frame when stacked."""
    if self._frame_channels is None:
      return obs
    return frames_lib.newest(obs, self._frame_channels)

  def _begin_segments(self, envs, obs):
    """The running segments of `envs` (an index) start now, with observations `obs`."""
    seg = self._segments
    seg.start[envs] = seg.step
    if seg.context is not None:
      seg.context[envs] = obs[..., :obs.shape[-1] - self._frame_channels]

  def random_policy(self, obs):
    """Uniform random discrete actions drawn from the task's generator (reproducible).

    The stored dist_inputs are zeros: as logits they describe exactly the
    uniform distribution the actions came from. Continuous (Box) actions have
    no such inputs here; the trainer samples those from its own distribution
    (RLTrainer.random_policy).
    """
    n = obs.shape[0]
    space = self.action_space
    if hasattr(space, 'n'):
      actions = self._rng.integers(0, space.n, size=n).astype(space.dtype)
    elif hasattr(space, 'nvec'):
      actions = self._rng.integers(0, space.nvec, size=(n,) + space.shape).astype(space.dtype)
    else:
      raise ConfigError(f'random initial trajectories in {space} need the acting '
                        "distribution's inputs; collect them through the trainer.")
    return actions, np.zeros((n, self._dist_inputs_size), np.float32)

  def collect_initial(self, policy_fn=None):
    """Collects `initial_trajectories` random trajectories into epoch 0.

    policy_fn: the random policy (default: `random_policy`, discrete actions).
    """
    if self._initial_trajectories > 0 and 0 not in self.epochs and self.n_interactions == 0:
      self.collect(policy_fn or self.random_policy,
                   n_trajectories=self._initial_trajectories, epoch_id=0)

  # -- collection ---------------------------------------------------------------

  def collect(self, policy_fn, n_trajectories=None, n_interactions=None, epoch_id=1,
              only_eval=False):
    """Steps the train envs until the quota is met; stores the epoch.

    Args:
      policy_fn: obs [n_envs, ...] -> (actions [n_envs, ...], dist_inputs [n_envs, k]).
      n_trajectories: stop once this many trajectories have been completed.
      n_interactions: stop after exactly this many env steps (a multiple of
        n_envs); the running segments are then stored cut (bootstrapping).
      epoch_id: the key of the stored epoch.
      only_eval: play but store nothing.

    Returns:
      dict with 'episode_returns' (undiscounted returns of the episodes that
      ended in this call: whole games with their unclipped scores, however
      the training envs clip rewards or split games), 'env_steps' and
      'n_trajectories' (stored).
    """
    if (n_trajectories is None) == (n_interactions is None):
      raise ConfigError('give exactly one of n_trajectories_per_epoch and '
                        'n_interactions_per_epoch.')
    if n_interactions is not None and n_interactions % self.n_envs:
      raise ConfigError(
          f'n_interactions_per_epoch ({n_interactions}) must be a multiple of '
          f'RLTask.n_envs ({self.n_envs}).')
    self._ensure_started()
    finished = []  # list of row dicts
    episode_returns = []
    steps = 0
    if n_interactions is not None:
      for _ in range(n_interactions // self.n_envs):
        self._step(policy_fn, finished, episode_returns)
      steps = n_interactions
      for j in np.nonzero(self._segments.length > 0)[0]:
        # The episode goes on in the next epoch from the same observation,
        # which is already the first row of its new segment.
        self._flush(j, self._obs[j], terminated=False, into=finished, next_obs=self._obs[j])
    else:
      while len(finished) < n_trajectories:
        self._step(policy_fn, finished, episode_returns)
        steps += self.n_envs
    self.n_interactions += steps
    self.n_episodes += len(episode_returns)
    if finished and not only_eval:
      self._store(epoch_id, finished)
    return {'episode_returns': episode_returns, 'env_steps': steps,
            'n_trajectories': 0 if only_eval else len(finished)}

  def _step(self, policy_fn, finished, episode_returns):
    seg = self._segments
    if self._may_grow and seg.length.max() >= seg.size - 1:
      seg.grow()
    actions, dist_inputs = policy_fn(self._obs)
    # Box actions are stored as sampled (their log-prob is what the policy
    # gave) but the env gets them clipped to its bounds.
    env_actions = actions if self._clip is None else np.clip(actions, *self._clip)
    next_obs, rewards, terminated, truncated, info = self._env.step(env_actions)
    row = seg.step % seg.size
    seg.action[row] = actions
    seg.reward[row] = rewards
    seg.dist_inputs[row] = dist_inputs
    seg.step += 1
    # For an env that just ended this is its reset observation: the first row
    # of its next segment (its final observation comes from info).
    seg.obs[seg.step % seg.size] = self._frame(next_obs)
    self._episode_return += rewards
    ended = terminated | truncated
    flush = ended
    if self.max_steps:
      flush = ended | (seg.length >= self.max_steps)
    if flush.any():
      for j in np.nonzero(flush)[0]:
        final_obs = info['final_obs'][j] if ended[j] else next_obs[j]
        self._flush(j, final_obs, bool(terminated[j]), finished, next_obs[j])
        if ended[j]:
          self._end_episode(j, info, episode_returns)
    self._obs = next_obs

  def _end_episode(self, j, info, episode_returns):
    """Records the return of env j's episode that just ended, if it ended a game."""
    if self._game_returns:
      # The stored rewards are clipped or the game goes on after this
      # episode: the game's own return comes from the wrapper that saw it all.
      final_info = info['final_info']
      if final_info.get('_' + wrappers_lib.GAME_RETURN, np.zeros(self.n_envs, bool))[j]:
        episode_returns.append(float(final_info[wrappers_lib.GAME_RETURN][j]))
    else:
      episode_returns.append(float(self._episode_return[j]))
    self._episode_return[j] = 0.0

  def _flush(self, j, final_obs, terminated, into, next_obs):
    """Moves env j's running segment into `into`; its next segment starts now, at `next_obs`."""
    seg = self._segments
    rows = seg.rows(j)
    steps = len(rows) - 1
    obs = seg.obs[rows, j]
    obs[steps] = self._frame(final_obs)
    done = np.zeros(steps + 1, np.float32)
    done[steps - 1] = float(terminated)
    mask = np.ones(steps + 1, np.float32)
    mask[steps] = 0.0
    # The last row holds only the final observation: zero action, reward, inputs.
    action = seg.action[rows, j]
    action[steps] = 0
    reward = seg.reward[rows, j]
    reward[steps] = 0.0
    dist_inputs = seg.dist_inputs[rows, j]
    dist_inputs[steps] = 0.0
    trajectory = {
        'observation': obs,
        'action': action,
        'reward': reward,
        'done': done,
        'mask': mask,
        'dist_inputs': dist_inputs,
        'return_': discounted_returns(reward, done, self.gamma).astype(np.float32),
    }
    if seg.context is not None:
      trajectory['context'] = frames_lib.context(seg.context[j], obs[0],
                                                 self.num_stacked_frames)
    into.append(trajectory)
    self._begin_segments(j, next_obs)

  def _store(self, epoch_id, trajectories):
    lengths = np.array([len(t['mask']) for t in trajectories], np.int64)
    starts = np.concatenate([[0], np.cumsum(lengths)[:-1]]).astype(np.int64)
    rows = {f: np.concatenate([t[f] for t in trajectories]) for f in _ROW_FIELDS}
    context = traj_context = None
    if self._frame_channels is not None:
      context = np.concatenate([t['context'] for t in trajectories])
      traj_context = np.array([len(t['context']) for t in trajectories], np.int64)
    data = EpochData(rows, starts, lengths, context, traj_context)
    if epoch_id in self.epochs:
      data = EpochData.concatenate([self.epochs[epoch_id], data])
    self.epochs[epoch_id] = data
    self.n_trajectories += len(trajectories)
    # Exactly the last n_replay_epochs epochs stay (epoch 0 ages out like any other).
    for key in [k for k in self.epochs if k <= epoch_id - self._n_replay_epochs]:
      del self.epochs[key]
    self._device_cache = {}

  # -- evaluation ---------------------------------------------------------------

  def evaluate(self, policy_fn, n_episodes, reset_seed, video_path=None):
    """Plays exactly `n_episodes` episodes on separate eval envs; returns their returns.

    One env per episode, all stepping together, reset with `reset_seed`, so
    an evaluation is reproducible on its own (it touches none of the training
    envs or generators): copy i is seeded with `reset_seed + i`, or, for an
    env with its own vectorised implementation (CartPole), every copy draws
    from one generator seeded with `reset_seed`.

    With `video_path` the first episode (env 0) is also recorded to that mp4
    file, on fresh envs of its own; the returns are the same as without.
    Missing parent folders are created. The file appears only once the video
    is complete: a failure leaves nothing at `video_path`.
    """
    if video_path is not None:
      return self._evaluate_recorded(policy_fn, n_episodes, reset_seed, video_path)
    env = self._eval_envs.get(n_episodes)
    if env is None:
      env, _ = self._make_env(n_episodes, training=False)
      self._eval_envs[n_episodes] = env
    return self._play(env, policy_fn, n_episodes, reset_seed)

  def _evaluate_recorded(self, policy_fn, n_episodes, reset_seed, video_path):
    folder = os.path.dirname(os.path.abspath(video_path))
    os.makedirs(folder, exist_ok=True)
    # Recorded into a temporary folder next to the target, then moved in
    # whole: the same file system makes os.replace atomic, and the folder
    # goes away with whatever a failed recording left in it.
    with tempfile.TemporaryDirectory(dir=folder, prefix='.rl-video-') as tmp:
      # A folder RecordVideo creates itself: it warns about an existing one.
      recording = os.path.join(tmp, 'video')
      with envs_lib.video_errors(self.env_name):
        # Not cached: the recorder records only its env's first episode.
        env, _ = self._make_env(n_episodes, training=False, video_folder=recording)
        try:
          returns = self._play(env, policy_fn, n_episodes, reset_seed)
        except BaseException:
          # Closing encodes the partial episode (or warns there is none) into
          # the folder about to be removed; neither its errors nor its
          # warnings may hide the failure that stopped the evaluation.
          with contextlib.suppress(Exception), warnings.catch_warnings():
            warnings.simplefilter('ignore')
            env.close()
          raise
        # Encodes the first episode if it was still running when play stopped.
        env.close()
      videos = [name for name in os.listdir(recording) if name.endswith('.mp4')]
      if len(videos) != 1:
        raise ConfigError(
            f"env {self.env_name!r} rendered no image frames, so no video was written; "
            'evaluate it without --video.')
      os.replace(os.path.join(recording, videos[0]), video_path)
    return returns

  def _play(self, env, policy_fn, n_episodes, reset_seed):
    """Plays one episode on each of the `n_episodes` sub-envs of `env`; returns their returns."""
    obs, _ = env.reset(seed=int(reset_seed))
    returns = np.zeros(n_episodes, np.float64)
    running = np.ones(n_episodes, bool)
    cap = self._episode_cap or 100_000
    for _ in range(cap):
      actions, _ = policy_fn(obs)
      obs, rewards, terminated, truncated, _ = env.step(actions)
      returns += np.where(running, rewards, 0.0)
      running &= ~(terminated | truncated)
      if not running.any():
        break
    return returns

  # -- sampling -----------------------------------------------------------------

  def _chosen(self, epochs):
    """The ids of the stored epochs that `epochs` selects (see `slice_data`), in order."""
    if not self.epochs:
      raise RuntimeError('no trajectories have been collected yet')
    keys = sorted(self.epochs)
    if epochs is None:
      chosen = keys
    else:
      last = keys[-1]
      chosen = sorted({e if e >= 0 else last + 1 + e for e in epochs} & set(keys))
      if not chosen:
        raise RuntimeError(f'none of the epochs {epochs} is in the buffer {keys}')
    return tuple(chosen)

  def _selected(self, epochs):
    """The selected epochs' trajectories as one EpochData."""
    return EpochData.concatenate([self.epochs[k] for k in self._chosen(epochs)])

  def slice_data(self, epochs=None, whole_trajectories=False):
    """The trajectories of `epochs` on the device, padded (rl.data.slices.SliceData).

    Epochs: a list of epoch ids, negative ones counted from the newest (-1 is
    the newest); None means every stored epoch. whole_trajectories: for
    slices of whole trajectories (records the longest). The padded copy is
    made and moved to the device once per selection and kept until the
    buffer changes; the merged host copy is not kept (for a large replay it
    would double the host memory).
    """
    cache_key = (self._chosen(epochs), whole_trajectories)
    cached = self._device_cache.get(cache_key)
    if cached is None:
      data = self._selected(epochs)
      cached = jax.device_put(slices.pad(
          data.rows, data.traj_start, data.traj_rows, whole_trajectories, data.context,
          data.traj_context, self.num_stacked_frames, min_rows=self._reserved_rows))
      self._device_cache[cache_key] = cached
    return cached

  def sample_batch(self, batch_size, epochs=None, max_slice_length=None,
                   min_slice_length=None, margin=0, sample_trajectories_uniformly=False):
    """One Batch of `batch_size` random slices, as numpy arrays (see rl.data.slices.sample).

    The trainers sample inside their jitted epochs instead; this is the same
    sampling for inspection and tests, keyed from the task's generator.
    Every slice is padded to exactly max(L, min_slice_length) rows, L =
    max_slice_length (None: whole trajectories, padded to the next power of
    two of the longest); padding has mask 0.
    """
    key = keys.seed_key(int(self._rng.integers(0, 2**31 - 1)))
    data = self.slice_data(epochs, whole_trajectories=max_slice_length is None)
    fields = _sample_jit(data, key, batch_size, max_slice_length,
                         min_slice_length, margin, sample_trajectories_uniformly)
    return Batch(**{f: np.asarray(v) for f, v in fields.items()})

  # -- checkpointing ----------------------------------------------------------------

  def state_dict(self):
    """Arrays (for orbax) and JSON-able metadata that restore the task exactly."""
    self._ensure_started()
    arrays = {
        'epochs': {str(k): v.state() for k, v in self.epochs.items()},
        'segments': self._segments.state(),
        'obs': self._obs,
        'episode_return': self._episode_return,
    }
    env_blob = envs_lib.dump_env_state(self._env)
    if env_blob is not None:
      arrays['env_state'] = np.frombuffer(env_blob, np.uint8).copy()
    meta = {
        'n_interactions': self.n_interactions,
        'n_trajectories': self.n_trajectories,
        'n_episodes': self.n_episodes,
        'rng': self._rng.bit_generator.state,
        'epoch_keys': sorted(self.epochs),
    }
    return arrays, meta

  def load_state_dict(self, arrays, meta):
    self._ensure_started()
    self.epochs = {int(k): EpochData.from_state(v) for k, v in arrays['epochs'].items()}
    self.n_interactions = meta['n_interactions']
    self.n_trajectories = meta['n_trajectories']
    self.n_episodes = meta['n_episodes']
    self._rng.bit_generator.state = meta['rng']
    self._segments.load_state(arrays['segments'])
    if 'env_state' in arrays:
      envs_lib.load_env_state(self._env, np.asarray(arrays['env_state']).tobytes())
      self._obs = np.array(arrays['obs'])
      self._episode_return = np.array(arrays['episode_return'])
    else:
      self._restart_episodes()
    self._device_cache = {}

  def _restart_episodes(self):
    """Resets every env and drops the episodes that were running at the checkpoint.

    For envs whose state could not be saved: their running episodes cannot
    be continued, and a kept segment would join an old observation to the
    new episode's first step. The reset is seeded from the restored step
    count, so each resume of a run starts different episodes, reproducibly.
    """
    seed = np.random.SeedSequence([self.seed, 2, self.n_interactions]).generate_state(1)[0]
    obs, _ = self._env.reset(seed=int(seed))
    seg = self._segments
    # Empty segments: the next step starts each one.
    seg.obs[seg.step % seg.size] = self._frame(obs)
    self._begin_segments(slice(None), obs)
    self._obs = obs
    self._episode_return = np.zeros(self.n_envs, np.float64)
    self.resume_warning = (
        f'the envs of {self.env_name!r} could not be saved with the checkpoint, so they '
        'were reset and their running episodes dropped: this resume is not bit-exact.')

  def close(self):
    self._env.close()
    for env in self._eval_envs.values():
      env.close()
