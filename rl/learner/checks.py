"""The configuration checks trainers share, each failing with one line that names the fix."""
from rl import ranges
from rl.errors import ConfigError

# The trainers whose epoch runs on JAX-native envs (those with `rollout_data`).
JAX_NATIVE_TRAINERS = ('A2C, PPO, AWR, SamplingAWR, A2CJoint, PPOJoint, AWRJoint, DQN '
                       'or DoubleDQN')


def check_on_policy(trainer, n_replay_epochs, alternative):
  """On-policy trainers learn from the newest epoch only; replay would bias them."""
  if trainer.on_policy and n_replay_epochs != 1:
    raise ConfigError(f'{type(trainer).__name__} is on-policy: n_replay_epochs must be 1, '
                      f'got {n_replay_epochs}. Use {alternative} to replay old epochs.')


def check_estimator(trainer, estimator, margin_setting, task, collection, alternative):
  """An estimator that bootstraps needs a step after the trained ones; one on Monte-Carlo
  returns needs whole episodes (check_whole_episodes, offering `alternative`).

  margin_setting: what to set, e.g. 'added_policy_slice_length must be >= 1 (got 0)'.
  """
  if estimator.bootstraps and estimator.margin < 1:
    raise ConfigError(
        f'{type(trainer).__name__}: the advantage estimator (@{estimator.name}) bootstraps from '
        f'the values of later steps, so {margin_setting}; set it, or use '
        'advantage_estimator = @monte_carlo.')
  if estimator.whole_episodes:
    check_whole_episodes(trainer, task, collection, alternative)


def check_whole_episodes(trainer, task, collection, alternative=''):
  """Monte-Carlo returns are only right on whole episodes; refuses cut segments.

  A stored return sums the rewards to the end of its segment. Collection cuts
  a running episode at an epoch's end when epochs are counted in env steps
  (n_interactions_per_epoch) and every RLTask.max_steps steps, and a return on
  such a segment would stop at the cut as if the episode had ended there.

  Args:
    trainer: the trainer being built (named in the message).
    task: its task.
    collection: the trainer's keyword arguments that choose how epochs are
      counted (n_trajectories_per_epoch, n_interactions_per_epoch,
      collect_per_epoch).
    alternative: another fix to offer, e.g. a bootstrapping estimator.
  """
  by_steps = (collection.get('n_interactions_per_epoch') is not None
              and collection.get('n_trajectories_per_epoch') is None
              and collection.get('collect_per_epoch') is None)
  cuts = [name for name, cut in (('n_interactions_per_epoch', by_steps),
                                 ('RLTask.max_steps', bool(task.max_steps))) if cut]
  if cuts:
    fixes = ['collect whole episodes with n_trajectories_per_epoch'
             + (' and RLTask.max_steps = None' if task.max_steps else '')]
    fixes += [alternative] if alternative else []
    raise ConfigError(
        f'{type(trainer).__name__} learns from Monte-Carlo returns, which would stop at '
        f"the episode cuts that {' and '.join(cuts)} make{'s' if len(cuts) == 1 else ''} "
        f"as if the episode had ended there; {', or '.join(fixes)}.")


def check_backend(trainer, task):
  """Refuses, in one line, a trainer that cannot train on the task's JAX-native envs."""
  if task.jax_native and not trainer.supports_jax_envs:
    raise ConfigError(f'{type(trainer).__name__} does not support JAX-native envs '
                      f'({task.env_name}) yet; use {JAX_NATIVE_TRAINERS}, or a gymnasium '
                      'env id.')


def check_divisible(steps, evals, steps_name, evals_name):
  """Uneven chunks are rejected up front, not when a later epoch would hit them."""
  if evals < 1 or steps % evals:
    raise ConfigError(f'{steps_name} ({steps}) must be a positive multiple of '
                      f'{evals_name} ({evals}); change one of them.')


def check_batch_size(trainer, param, batch_size, n_replay_epochs=1):
  """A policy batch of at least one slice, and no more than the env steps it is drawn from.

  Batches are drawn with replacement, so a larger one would train on repeats
  of the same steps. The steps are known ahead only when an epoch is counted
  in env steps (n_interactions_per_epoch); whole trajectories vary in length.
  A value regression's batch is not bounded: configs/a2c_cartpole.gin's tuned
  value batch is 256 of its 128 steps.
  """
  name = type(trainer).__name__
  ranges.in_range(f'{name}.{param}', batch_size, low=1)
  steps = trainer.options.n_interactions
  if steps is not None and batch_size > steps * n_replay_epochs:
    replay = f' x n_replay_epochs = {n_replay_epochs}' if n_replay_epochs != 1 else ''
    raise ConfigError(
        f'{name}.{param} = {batch_size} is larger than the {steps * n_replay_epochs} env steps '
        f'its batches are drawn from ({name}.n_interactions_per_epoch = {steps}{replay}), so '
        f'a batch would repeat steps; bind {name}.{param} <= {steps * n_replay_epochs} or '
        'collect more steps per epoch.')


def value_scale_of(trainer, task, scale_value_targets):
  """1 / (1 - gamma), by which scaled value targets are divided (1 unscaled); refuses gamma 1."""
  if not scale_value_targets:
    return 1.0
  if task.gamma >= 1:
    name = type(trainer).__name__
    raise ConfigError(f'{name}.scale_value_targets divides the value targets by 1 - RLTask.gamma, '
                      f'which is 0 at RLTask.gamma = {task.gamma}; bind RLTask.gamma < 1 or '
                      f'{name}.scale_value_targets = False.')
  return 1.0 / (1.0 - task.gamma)
