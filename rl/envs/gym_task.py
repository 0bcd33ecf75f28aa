"""GymTask: a gymnasium vector env, its collect loop, evaluation and saved env state.

What `RLTask(env=<gymnasium id>, ...)` (rl.envs.task) builds. The trajectories
it collects are stored in rl.data.trajectories (the layout is described
there), built once the trainer has declared what it needs (`build_storage`).
Acting sees the env's observations as they are (stacked, with
num_stacked_frames > 1); the storage keeps one frame a step.

Collection. All `n_envs` envs step together with one batched policy call per
step. Episodes that are still running when an epoch's quota is met carry over
to the next epoch (their data stays in the running segments), so no episode is
dropped and short episodes are not favoured.
"""
import contextlib
import os
import tempfile
import warnings

import gymnasium as gym
import numpy as np

from rl.data import trajectories as trajectories_lib
from rl.envs import bookkeeping
from rl.envs import env_state
from rl.envs import episode_context
from rl.envs import registry
from rl.envs import vector_envs
from rl.envs import video
from rl.envs import wrappers as wrappers_lib
from rl.errors import ConfigError

# Observations are stored in fixed-shape arrays and fed to the networks as
# such; composite spaces (Tuple, Dict, ...) have no array shape.
OBSERVATION_SPACES = (gym.spaces.Box, gym.spaces.Discrete, gym.spaces.MultiDiscrete,
                      gym.spaces.MultiBinary)


class GymTask:
  """Envs stepped on the host, the trajectories collected from them, evaluation.

  Implements rl.envs.task.Task; made by the RLTask factory, whose arguments
  (the RLTask gin bindings) are documented there.
  """

  jax_native = False

  def __init__(self, env, env_kwargs=None, n_envs=8, gamma=0.99, max_steps=None,
               time_limit=None, initial_trajectories=0, num_stacked_frames=1,
               atari_preprocessing=False, normalize_rewards=False, context_length=None, seed=0):
    registered = registry.check_env_id(env)
    if isinstance(num_stacked_frames, bool) or not isinstance(num_stacked_frames, int) or (
        num_stacked_frames < 1):
      raise ConfigError(f'RLTask.num_stacked_frames must be an integer >= 1 (1: no stacking), '
                        f'got {num_stacked_frames!r}.')
    episode_context.check_context_length(context_length, num_stacked_frames)
    self.env_name = env
    self._env_kwargs = dict(env_kwargs or {})
    self.n_envs = int(n_envs)
    self.gamma = float(gamma)
    self.max_steps = max_steps
    self.time_limit = time_limit
    self.seed = int(seed)
    self.initial_trajectories = int(initial_trajectories)
    self._rng = np.random.default_rng(np.random.SeedSequence([self.seed, 0]))
    self.num_stacked_frames = num_stacked_frames
    self.normalize_rewards = bool(normalize_rewards)
    self.context_length = context_length
    self._atari = wrappers_lib.atari_preprocessing() if atari_preprocessing else None
    if self._atari is not None:
      self._env_kwargs, sticky = wrappers_lib.atari_env_kwargs(registered, self._env_kwargs)
      self._atari = self._atari._replace(repeat_action_probability=sticky)

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
    self.action_space = self._env.single_action_space
    space = self.action_space
    # The bounds the env gets Box actions clipped to (see _step); None for other spaces.
    self._clip = (space.low, space.high) if hasattr(space, 'low') else None
    spec_limit = self._env.envs[0].spec.max_episode_steps if self._env.envs[0].spec else None
    self._episode_cap = time_limit or spec_limit
    self._eval_envs = {}

    self.needs = None  # the TaskNeeds of build_storage
    self.storage = None  # the rl.data.trajectories.Trajectories of build_storage
    self.n_interactions = 0
    self.steps_collecting = 0  # env steps of the collection in progress (progress lines)
    self.n_trajectories = 0
    self.n_episodes = 0
    self._obs = None  # the envs' current observations, once they are reset
    self._episode_return = np.zeros(self.n_envs, np.float64)
    # Set when a resume could not restore the envs exactly (said in the run's log).
    self.resume_warning = None

  # -- setup ------------------------------------------------------------------

  def _make_env(self, n_envs, training, video_folder=None):
    """A vector env of `n_envs` wrapped envs, and whether it reports game returns in its infos.

    Training and eval envs differ in the training-only wrappers (reward
    clipping, episodes ending on a lost life; see rl.envs.wrappers), and eval envs
    use the env's own vectorised implementation where it has one
    (rl.envs.vector_envs.make_vector_env's `vectorized`; recorded or not, the same).
    n_envs None: one env of the same wrappers, no vector env.
    """
    wrappers, game_returns = wrappers_lib.env_wrappers(
        self._atari, self.num_stacked_frames, training, self.time_limit,
        reward_gamma=self.gamma if self.normalize_rewards else None,
        context_length=self.context_length)
    # Under Atari preprocessing the time limit is a wrapper above the frame
    # skip, so it counts agent steps as everything else here does.
    time_limit = None if self._atari is not None else self.time_limit
    if n_envs is None:
      return vector_envs.make_env(self.env_name, self._env_kwargs, time_limit,
                                  wrappers), game_returns
    env = vector_envs.make_vector_env(self.env_name, n_envs, self._env_kwargs, time_limit,
                                   video_folder=video_folder, wrappers=wrappers,
                                   vectorized=not training)
    return env, game_returns

  def eval_env(self, n_envs=None):
    """A new env as evaluation plays them, for the caller to step and close: one gymnasium
    env (n_envs None), or the vector env of `n_envs` copies that `evaluate` plays on."""
    return self._make_env(n_envs, training=False)[0]

  def share_programs(self, other):
    """Uses `other`'s compiled functions where it has any (a task of the same config)."""
    del other  # the gymnasium task compiles nothing of its own

  def build_storage(self, needs):
    """Makes the trajectory storage for what the trainer declares (an rl.envs.task.TaskNeeds).

    Called once, by the trainer, before anything is collected or restored.
    """
    self.needs = bookkeeping.checked_needs(self, needs)
    self.storage = trajectories_lib.Trajectories(
        self.n_envs, self.gamma, self.observation_space, self.frame_observation_space,
        self.action_space, self.num_stacked_frames, self.max_steps or self._episode_cap,
        needs.n_replay_epochs, needs.dist_inputs_size, needs.reserved_rows)

  @property
  def epochs(self):
    """The stored epochs: epoch id -> rl.data.trajectories.EpochData."""
    return self.storage.epochs

  def slice_data(self, epochs=None, whole_trajectories=False):
    """The stored trajectories of `epochs` on the device (see Trajectories.slice_data)."""
    return self.storage.slice_data(epochs, whole_trajectories)

  def replay(self):
    """Every stored epoch on the device, updated epoch by epoch (see Trajectories.replay)."""
    return self.storage.replay()

  def _ensure_started(self):
    """Resets the training envs on first use; the storage must exist by then."""
    if self._obs is not None:
      return
    if self.storage is None:
      raise RuntimeError('the task has no trajectory storage yet: the trainer calls '
                         'build_storage(TaskNeeds(...)) before collecting or restoring')
    obs, _ = self._env.reset(seed=self.seed)
    self._obs = obs
    self.storage.restart(obs)

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
    return actions, np.zeros((n, self.needs.dist_inputs_size), np.float32)

  def collect_initial(self, policy_fn=None):
    """Collects `initial_trajectories` random trajectories into epoch 0.

    policy_fn: the random policy (default: `random_policy`, discrete actions).
    """
    if self.initial_trajectories > 0 and 0 not in self.epochs and self.n_interactions == 0:
      self.collect(policy_fn or self.random_policy,
                   n_trajectories=self.initial_trajectories, epoch_id=0)

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
      for i in range(n_interactions // self.n_envs):
        self._step(policy_fn, finished, episode_returns)
        self.steps_collecting = (i + 1) * self.n_envs
      steps = n_interactions
      for j in np.nonzero(self.storage.segments.length > 0)[0]:
        # The episode goes on in the next epoch from the same observation,
        # which is already the first row of its new segment.
        finished.append(self.storage.flush(j, self._obs[j], False, self._obs[j]))
    else:
      while len(finished) < n_trajectories:
        self._step(policy_fn, finished, episode_returns)
        steps += self.n_envs
        self.steps_collecting = steps
    self.n_interactions += steps
    self.steps_collecting = 0
    self.n_episodes += len(episode_returns)
    if finished and not only_eval:
      self.storage.store(epoch_id, finished)
      self.n_trajectories += len(finished)
    return {'episode_returns': episode_returns, 'env_steps': steps,
            'n_trajectories': 0 if only_eval else len(finished)}

  def _step(self, policy_fn, finished, episode_returns):
    actions, dist_inputs = policy_fn(self._obs)
    # Box actions are stored as sampled (their log-prob is what the policy
    # gave) but the env gets them clipped to its bounds.
    env_actions = actions if self._clip is None else np.clip(actions, *self._clip)
    next_obs, rewards, terminated, truncated, info = self._env.step(env_actions)
    store = self.storage
    store.write_step(actions, rewards, dist_inputs, next_obs)
    self._episode_return += rewards
    ended = terminated | truncated
    flush = ended
    if self.max_steps:
      flush = ended | (store.segments.length >= self.max_steps)
    if flush.any():
      for j in np.nonzero(flush)[0]:
        # An ended episode's final observation comes from info: next_obs is its reset.
        final_obs = info['final_obs'][j] if ended[j] else next_obs[j]
        finished.append(store.flush(j, final_obs, bool(terminated[j]), next_obs[j]))
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
      with video.video_errors(self.env_name):
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

  # -- checkpointing ----------------------------------------------------------------

  def state_dict(self):
    """Arrays (for orbax) and JSON-able metadata that restore the task exactly."""
    self._ensure_started()
    arrays = {
        **self.storage.state(),
        'obs': self._obs,
        'episode_return': self._episode_return,
    }
    env_blob = env_state.dump_env_state(self._env)
    if env_blob is not None:
      arrays['env_state'] = np.frombuffer(env_blob, np.uint8).copy()
    meta = {**bookkeeping.counters(self), 'rng': self._rng.bit_generator.state,
            'epoch_keys': sorted(self.epochs)}
    return arrays, meta

  def load_state_dict(self, arrays, meta):
    self._ensure_started()
    self.storage.load_state(arrays)
    bookkeeping.load_counters(self, meta)
    self._rng.bit_generator.state = meta['rng']
    if 'env_state' in arrays:
      env_state.load_env_state(self._env, np.asarray(arrays['env_state']).tobytes())
      self._obs = np.array(arrays['obs'])
      self._episode_return = np.array(arrays['episode_return'])
    else:
      self._restart_episodes()

  def _restart_episodes(self):
    """Resets every env and drops the episodes that were running at the checkpoint.

    For envs whose state could not be saved: their running episodes cannot
    be continued, and a kept segment would join an old observation to the
    new episode's first step. The reset is seeded from the restored step
    count, so each resume of a run starts different episodes, reproducibly.
    """
    seed = np.random.SeedSequence([self.seed, 2, self.n_interactions]).generate_state(1)[0]
    obs, _ = self._env.reset(seed=int(seed))
    # Empty segments: the next step starts each one.
    self.storage.restart(obs)
    self._obs = obs
    self._episode_return = np.zeros(self.n_envs, np.float64)
    self.resume_warning = (
        f'the envs of {self.env_name!r} could not be saved with the checkpoint, so they '
        'were reset and their running episodes dropped: this resume is not bit-exact.')

  def close(self):
    self._env.close()
    for env in self._eval_envs.values():
      env.close()
