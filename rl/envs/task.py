"""The task: the interface both env backends implement, what a trainer needs of one, RLTask.

A task is the envs a trainer learns in, what it has collected from them and
their evaluation. Two backends implement it side by side: rl.envs.gym_task
(gymnasium envs stepped on the host, trajectories stored there) and
rl.envs.jax_task (gymnax envs stepped on the device inside the trainer's
compiled epoch). `RLTask`, the gin-configurable factory, picks one from the
env id, so every `RLTask.*` binding configures either.

A task is built in two steps: the factory makes the envs, then the trainer,
once it is built, declares what it needs stored (TaskNeeds: how many epochs it
replays, the width of the policy outputs stored with every step, ...) in one
call of `build_storage`, before anything is collected or restored. Those
values have one source of truth, the trainer's configuration.
"""
import numbers
from typing import Any, NamedTuple, Optional, Protocol

import gin

from rl import ranges
from rl.configurables import configurable
from rl.envs import gymnax_envs as jax_envs
from rl.envs.gym_task import GymTask
from rl.envs.jax_task import JaxTask
from rl.errors import ConfigError


class TaskNeeds(NamedTuple):
  """What a trainer needs its task to store (Task.build_storage).

  n_replay_epochs: how many of the latest epochs are kept (1: the newest only).
  dist_inputs_size: width of the policy outputs (the acting distribution's
    inputs) stored with every step.
  reserved_rows: gymnasium envs: the device copies of the stored epochs are
    padded to at least this many rows from the start, so that a replay
    filling over a run keeps one padded size and compiles once (0: none).
  steps_per_epoch: JAX-native envs: steps per env of one epoch, the size of
    each epoch in the device replay ring (None on gymnasium envs).
  """
  n_replay_epochs: int = 1
  dist_inputs_size: int = 1
  reserved_rows: int = 0
  steps_per_epoch: Optional[int] = None


class Task(Protocol):
  """What a trainer, the runner and the evaluation use of a task, on either backend.

  Besides this, a GymTask collects on the host (`collect`, `collect_initial`,
  `slice_data`) and a JaxTask gives the trainer's compiled epoch its pure
  `rollout` and `epoch_slices` and its state between epochs (`carry`);
  `jax_native` says which. Each gives the envs its evaluation plays on
  (`eval_env`: gymnasium envs, or the gymnax env and its parameters).
  """

  jax_native: bool
  env_name: str
  n_envs: int
  gamma: float
  max_steps: Optional[int]  # segments are cut after this many steps (None: whole episodes)
  time_limit: Optional[int]
  seed: int
  num_stacked_frames: int
  observation_space: Any  # a gymnasium space: what the policy sees
  frame_observation_space: Any  # one frame of it (the same without stacking)
  action_space: Any
  needs: Optional[TaskNeeds]  # what build_storage was given; None before
  # Collection counters, checkpointed: env steps, stored trajectories, ended episodes.
  n_interactions: int
  n_trajectories: int
  n_episodes: int
  resume_warning: Optional[str]  # set when a restore could not be bit-exact

  def build_storage(self, needs: TaskNeeds) -> None:
    """Makes the storage for `needs`; called once, before any collection or restore."""

  def share_programs(self, other: 'Task') -> None:
    """Uses `other`'s compiled functions (a task of the same config and another seed)."""

  def evaluate(self, policy, n_episodes: int, reset_seed: int, video_path=None):
    """Returns of `n_episodes` evaluation episodes, reproducible from `reset_seed`."""

  def state_dict(self) -> tuple:
    """(arrays, JSON-able metadata) that restore the task exactly."""

  def load_state_dict(self, arrays, meta) -> None:
    """Restores what `state_dict` returned."""

  def close(self) -> None:
    """Releases the envs."""


# Parameters that belong to the trainer, not to RLTask (TaskNeeds comes from the trainer).
TRAINER_PARAMETERS = ('n_replay_epochs',)


def misplaced_binding(param, trainer=None):
  """The one-line fix for a binding `RLTask.<param>` of a trainer's parameter, else None.

  For the runner's gin error layer, which otherwise can only say that RLTask
  has no such parameter. trainer: the trainer class's name, where known.
  """
  if param not in TRAINER_PARAMETERS:
    return None
  name = trainer or '<Trainer>'
  example = '' if trainer else f' (e.g. DQN.{param})'
  return (f'{param} is a trainer parameter: bind {name}.{param}{example} instead of '
          f'RLTask.{param}.')


# Seeds go to numpy's SeedSequence and gymnasium's resets (non-negative
# integers), JAX keys (32-bit words) and, with a small offset added, to the
# networks' initialisation; 0 .. 2**31 - 1 fits all of them on both backends.
MAX_SEED = 2**31 - 1


def check_seed(seed, name='RLTask.seed (--seed)'):
  """Refuses a seed outside 0 .. MAX_SEED (or not an integer) with a ConfigError."""
  integer = isinstance(seed, numbers.Integral) and not isinstance(seed, bool)
  if not integer or not 0 <= seed <= MAX_SEED:
    raise ConfigError(f'{name} must be an integer from 0 to {MAX_SEED} (2**31 - 1), '
                      f'got {seed!r}.')


# What the JAX-native backend does not do, with each parameter's default.
_NOT_ON_JAX_ENVS = (('max_steps', None), ('initial_trajectories', 0),
                    ('num_stacked_frames', 1), ('atari_preprocessing', False),
                    ('normalize_rewards', False), ('context_length', None))


@configurable('RLTask')
# pylint: disable-next=invalid-name
def RLTask(env=gin.REQUIRED, env_kwargs=None, n_envs=8, gamma=0.99, max_steps=None,
           time_limit=None, initial_trajectories=0, num_stacked_frames=1,
           atari_preprocessing=False, normalize_rewards=False, context_length=None, seed=0):
  """The task of `env`: a GymTask, or a JaxTask for a 'gymnax:' id (both a Task).

  Named as its gin configurable, so that code and configs say RLTask alike.

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
      stack. Any env with Box observations; 1 = no stacking. The storage
      keeps each frame once and rebuilds the stacks when rows are gathered
      (rl.data.frames).
    atari_preprocessing: wrap every env (training and eval) in the Atari
      preprocessing that the gin configurable `atari_preprocessing` sets up
      (no-op starts, frame skip 4 with the ALE env made with frameskip=1,
      max-pool over the last two frames, 84x84x1 grayscale uint8, and for
      training only reward clipping and optionally episodes that end on a
      lost life); for ALE envs. `time_limit` then counts agent steps. The
      logged train and eval returns stay the games' unclipped scores.
    normalize_rewards: training envs store each reward divided by the running
      standard deviation of their discounted return (gamma's), as the RL Zoo's
      VecNormalize does for MuJoCo; gymnasium's NormalizeReward, one per env,
      saved with the checkpoint. Logged train and eval returns stay the env's
      own.
    context_length: each observation is the window of the episode's last
      this many observations, [K, F + 1] with a column flagging real steps
      (rl.envs.episode_context): what a sequence body (@TransformerDecoder)
      reads. Vector observations only. None: one observation a step.
    seed: seeds env resets and random actions; trainers derive their keys
      from it too. Same seed and config give the same numbers. From 0 to
      2**31 - 1 (MAX_SEED).
  """
  check_seed(seed)
  if n_envs < 1:
    raise ConfigError(f'RLTask.n_envs must be >= 1, got {n_envs}.')
  ranges.in_range('RLTask.gamma', gamma, low=0, high=1, why='a discount factor')
  # num_stacked_frames and context_length are checked where they are used.
  ranges.in_range('RLTask.max_steps', max_steps, low=1)
  ranges.in_range('RLTask.time_limit', time_limit, low=1)
  ranges.in_range('RLTask.initial_trajectories', initial_trajectories, low=0)
  if not jax_envs.is_jax_env(env):
    return GymTask(env, env_kwargs, n_envs, gamma, max_steps, time_limit,
                   initial_trajectories, num_stacked_frames, atari_preprocessing,
                   normalize_rewards, context_length, seed)
  given = dict(max_steps=max_steps, initial_trajectories=initial_trajectories,
               num_stacked_frames=num_stacked_frames, atari_preprocessing=atari_preprocessing,
               normalize_rewards=normalize_rewards, context_length=context_length)
  for name, default in _NOT_ON_JAX_ENVS:
    if given[name] != default:
      raise ConfigError(f'RLTask.{name} = {given[name]!r} is not supported on JAX-native envs '
                        f'({env}) yet; remove the binding or use a gymnasium env id.')
  return JaxTask(env, env_kwargs, n_envs, gamma, time_limit, seed)
