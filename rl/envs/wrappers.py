"""The wrappers RLTask puts around each env: Atari preprocessing and frame stacking.

Each sub-env of a vector env is wrapped, innermost first, in

  StickyAction         (with RLTask.atari_preprocessing, for envs with sticky
                       actions) gymnasium's own, frame by frame, in place of the ALE's.
  AtariPreprocessing   (with RLTask.atari_preprocessing) gymnasium's own: no-op
                       starts, frame skip, max-pool over the last two frames,
                       84x84 grayscale uint8 frames with a channel axis.
  TimeLimit            (with atari_preprocessing and RLTask.time_limit) the
                       limit in agent steps, not emulator frames.
  GameReturn           (training envs whose rewards or episodes differ from the
                       game's) reports each whole game's unclipped return.
  TerminalOnLifeLoss   (training, atari_preprocessing.terminal_on_life_loss)
  ClipReward           (training, atari_preprocessing.clip_rewards)
  NormalizeReward      (training, RLTask.normalize_rewards) gymnasium's own.
  StackFrames          (RLTask.num_stacked_frames > 1, any env) always last.
  EpisodeContext       (RLTask.context_length, vector observations) always last;
                       rl.envs.episode_context.

Evaluation envs get the same observations (the first two and the last two) but
the game's own rewards and episodes, so an eval return is a game score.
Every wrapper here pickles with the env it wraps: rl.envs.env_state.dump_env_state saves
them with the checkpoint for an exact resume.
"""
import collections
import inspect

import gymnasium as gym
import numpy as np
from gymnasium.envs.registration import load_env_creator

from rl.configurables import configurable
from rl.envs.episode_context import EpisodeContext
from rl.errors import ConfigError

# The info key under which GameReturn reports a finished game's return.
GAME_RETURN = 'game_return'

# repeat_action_probability: the env's sticky actions, which StickyAction applies
# frame by frame in place of the ALE (atari_env_kwargs says why).
AtariOptions = collections.namedtuple(
    'AtariOptions',
    ['noop_max', 'frame_skip', 'screen_size', 'terminal_on_life_loss', 'clip_rewards',
     'repeat_action_probability'], defaults=(0.0,))


@configurable
def atari_preprocessing(noop_max=30, frame_skip=4, screen_size=84, terminal_on_life_loss=False,
                        clip_rewards=True):
  """The Atari preprocessing that `RLTask.atari_preprocessing = True` switches on.

  The defaults are the usual DQN-style setup (Machado et al. 2018 keep life
  loss out of the episode ends, as the default here does).

  Args:
    noop_max: a game starts after 1..noop_max no-op actions, drawn from the
      env's seeded generator (0: no no-op starts).
    frame_skip: emulator frames per agent step; the action repeats over them,
      their rewards add up and the observation is the pixel-wise max of the
      last two frames (it hides the sprites some games draw every other frame).
    screen_size: frames are resized to screen_size x screen_size (grayscale).
    terminal_on_life_loss: training episodes end when a life is lost, and the
      next one goes on in the same game (not a reset); eval envs never do this.
    clip_rewards: training rewards are clipped to [-1, 1], so one learning rate
      suits games whose scores differ by orders of magnitude; eval envs and the
      logged returns keep the game's scores.

  Returns:
    The checked options (AtariOptions).

  Raises:
    ConfigError: a value gymnasium's AtariPreprocessing would refuse.
  """
  for name, value, low in (('noop_max', noop_max, 0), ('frame_skip', frame_skip, 1),
                           ('screen_size', screen_size, 1)):
    if isinstance(value, bool) or not isinstance(value, int) or value < low:
      raise ConfigError(f'atari_preprocessing.{name} must be an integer >= {low}, got {value!r}.')
  return AtariOptions(noop_max, frame_skip, screen_size, bool(terminal_on_life_loss),
                      bool(clip_rewards))


# The ALE's keyword for its sticky-action probability.
_STICKY = 'repeat_action_probability'


def atari_env_kwargs(env_id, env_kwargs):
  """`env_kwargs` for an env under Atari preprocessing, and its sticky-action probability.

  The ALE's own frame skip is turned off: AtariPreprocessing repeats each
  action itself and max-pools the last two frames; with the ALE skipping
  frames too, each agent step would span frame_skip squared frames and the
  pooled frames would be far apart.

  So are the ALE's own sticky actions: the ALE keeps the action it repeats
  outside the state it saves, so a checkpoint could not continue the game
  exactly. gymnasium's StickyAction repeats it instead, frame by frame as the
  ALE does, drawing from the env's generator; both are saved with the env.

  Returns:
    (kwargs, repeat_action_probability): the kwargs to make the env with, and
    the probability the env would have repeated an action with (its
    env_kwargs', its registration's or its default; 0.0 for an env without
    sticky actions).

  Raises:
    ConfigError: the env takes no `frameskip` (it is no ALE env), or the
      user's env_kwargs set a frameskip other than 1.
  """
  spec = gym.spec(env_id)
  entry_point = spec.entry_point
  try:
    creator = entry_point if callable(entry_point) else load_env_creator(entry_point)
    parameters = inspect.signature(creator).parameters
  except Exception:  # pylint: disable=broad-except
    parameters = None  # gym.make_vec reports a bad entry point better.
  if parameters is not None and 'frameskip' not in parameters:
    raise ConfigError(
        f'RLTask.atari_preprocessing is for ALE envs (it makes them with frameskip=1 and skips '
        f"frames itself), and {env_id!r} takes no frameskip; set RLTask.atari_preprocessing = "
        "False or use an 'ALE/' env.")
  if env_kwargs.get('frameskip', 1) != 1:
    raise ConfigError(
        f"RLTask.env_kwargs sets frameskip={env_kwargs['frameskip']!r}, but "
        'RLTask.atari_preprocessing skips frames itself (atari_preprocessing.frame_skip); '
        'remove frameskip from RLTask.env_kwargs.')
  kwargs = dict(env_kwargs, frameskip=1)
  if _STICKY not in (parameters or {}):
    return kwargs, 0.0
  default = parameters[_STICKY].default
  probability = float(env_kwargs.get(_STICKY, spec.kwargs.get(_STICKY, default)))
  return dict(kwargs, **{_STICKY: 0.0}), probability


def env_wrappers(atari, num_stacked_frames, training, time_limit=None, reward_gamma=None,
                 context_length=None):
  """The wrapper functions for each sub-env, innermost first (see the module docstring).

  Args:
    atari: AtariOptions, or None without Atari preprocessing.
    num_stacked_frames: observations are the last this many frames (1: off).
    training: training envs also get the training-only reward and episode
      changes; evaluation envs do not.
    time_limit: with `atari`, truncate after this many agent steps (None: the
      env's own limit). Without `atari` it is gym.make's business.
    reward_gamma: training envs divide each reward by the running standard
      deviation of the return discounted by this gamma (gymnasium's
      NormalizeReward; RLTask.normalize_rewards). None: rewards as they are.
    context_length: observations are windows of the episode's last this many
      observations (rl.envs.episode_context). None: off.

  Returns:
    (wrappers, reports_game_return): the functions env -> wrapped env, and
    whether the training envs' rewards or episodes differ from the game's, in
    which case GameReturn puts each finished game's return into the info of
    the step that ends it (under GAME_RETURN).
  """
  wrappers = []
  normalizes = training and reward_gamma is not None
  changes_rewards = normalizes or (training and atari is not None and (
      atari.clip_rewards or atari.terminal_on_life_loss))
  if atari is not None:
    if atari.repeat_action_probability > 0:
      wrappers.append(lambda env: gym.wrappers.StickyAction(
          env, repeat_action_probability=atari.repeat_action_probability))
    wrappers.append(lambda env: gym.wrappers.AtariPreprocessing(
        env, noop_max=atari.noop_max, frame_skip=atari.frame_skip,
        screen_size=atari.screen_size, terminal_on_life_loss=False, grayscale_obs=True,
        grayscale_newaxis=True, scale_obs=False))
    if time_limit is not None:
      wrappers.append(lambda env: gym.wrappers.TimeLimit(env, int(time_limit)))
  if changes_rewards:
    wrappers.append(GameReturn)
    if atari is not None and atari.terminal_on_life_loss:
      wrappers.append(TerminalOnLifeLoss)
    if atari is not None and atari.clip_rewards:
      wrappers.append(ClipReward)
    if normalizes:
      wrappers.append(lambda env: gym.wrappers.NormalizeReward(env, gamma=float(reward_gamma)))
  if num_stacked_frames > 1:
    # Last: the task stores each frame once and rebuilds the stacks when rows
    # are gathered (rl.data.frames), which needs the stack to be the outermost
    # observation change.
    wrappers.append(lambda env: StackFrames(env, num_stacked_frames))
  if context_length is not None:
    wrappers.append(lambda env: EpisodeContext(env, context_length))
  return wrappers, changes_rewards


class GameReturn(gym.Wrapper):
  """Adds the undiscounted return of the game to the info of the step that ends the game.

  Sits below the wrappers that clip rewards or end episodes early, so it sees
  the game's own rewards and ends: a game split into several training
  episodes by TerminalOnLifeLoss still reports one return.
  """

  def __init__(self, env):
    super().__init__(env)
    self._return = 0.0

  def reset(self, *, seed=None, options=None):
    self._return = 0.0
    return self.env.reset(seed=seed, options=options)

  def step(self, action):
    obs, reward, terminated, truncated, info = self.env.step(action)
    self._return += float(reward)
    if terminated or truncated:
      info = dict(info, **{GAME_RETURN: self._return})
      self._return = 0.0
    return obs, reward, terminated, truncated, info


class TerminalOnLifeLoss(gym.Wrapper):
  """Ends the episode when a life is lost; the next episode goes on in the same game.

  The value of the state after a lost life is then learnt as the end of
  everything the agent can still earn with it, which speeds up learning in
  some games. Unlike gymnasium's AtariPreprocessing(terminal_on_life_loss=
  True), whose next reset starts a new game, the reset after a lost life only
  returns the current observation: the game and its score go on, and a real
  reset comes only once the game is over (or a reset is seeded). Lives are read
  from the 'lives' entry of the env's info, which ALE envs report.
  """

  def __init__(self, env):
    super().__init__(env)
    self._lives = None
    self._life_lost = False  # the last episode ended on a lost life, the game goes on
    self._last = None  # (observation, info) of the last step

  def reset(self, *, seed=None, options=None):
    if self._life_lost and seed is None and options is None:
      self._life_lost = False
      obs, info = self._last
      return obs, dict(info)
    obs, info = self.env.reset(seed=seed, options=options)
    self._lives = self._read_lives(info)
    self._life_lost = False
    return obs, info

  def step(self, action):
    obs, reward, terminated, truncated, info = self.env.step(action)
    lives = self._read_lives(info)
    self._life_lost = lives < self._lives and not (terminated or truncated)
    self._lives = lives
    self._last = (obs, info)
    return obs, reward, terminated or self._life_lost, truncated, info

  def _read_lives(self, info):
    if 'lives' not in info:
      env_id = self.spec.id if self.spec else type(self.unwrapped).__name__
      raise ConfigError(
          f"atari_preprocessing.terminal_on_life_loss needs an env that reports 'lives' in its "
          f'info, and {env_id!r} does not; set atari_preprocessing.terminal_on_life_loss = False.')
    return int(info['lives'])


class ClipReward(gym.Wrapper):
  """Clips each reward to [-1, 1].

  Not gymnasium's ClipReward: that one holds a lambda, which does not pickle,
  and the envs must pickle for an exact resume.
  """

  def step(self, action):
    obs, reward, terminated, truncated, info = self.env.step(action)
    return obs, float(np.clip(reward, -1.0, 1.0)), terminated, truncated, info


class StackFrames(gym.Wrapper):
  """Observations are the last `n` frames concatenated on the last (channel) axis.

  84x84x1 Atari frames stack to 84x84xn, channel f * C + c holding channel c of
  the f-th oldest frame; a vector of k features stacks to n * k features. The
  first observation of an episode is repeated to fill the stack. Not
  gymnasium's FrameStackObservation: it stacks on a new first axis, and the
  networks read images channels last.

  Attributes:
    frame_space: the observation space of one frame (the wrapped env's).
  """

  def __init__(self, env, n):
    super().__init__(env)
    space = env.observation_space
    if not isinstance(space, gym.spaces.Box) or not space.shape:
      env_id = env.spec.id if env.spec else type(env.unwrapped).__name__
      raise ConfigError(
          f'RLTask.num_stacked_frames = {n} stacks observations on their last axis, but '
          f'{env_id!r} has the observation space {space}; use a Box env with an observation '
          'axis or set RLTask.num_stacked_frames = 1.')
    self.frame_space = space
    self.observation_space = gym.spaces.Box(
        np.concatenate([space.low] * n, axis=-1), np.concatenate([space.high] * n, axis=-1),
        dtype=space.dtype)
    self._frames = collections.deque(maxlen=n)

  def reset(self, *, seed=None, options=None):
    obs, info = self.env.reset(seed=seed, options=options)
    for _ in range(self._frames.maxlen):
      self._frames.append(obs)
    return self._observation(), info

  def step(self, action):
    obs, reward, terminated, truncated, info = self.env.step(action)
    self._frames.append(obs)
    return self._observation(), reward, terminated, truncated, info

  def _observation(self):
    return np.concatenate(self._frames, axis=-1)
