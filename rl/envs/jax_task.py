"""JaxTask: the RLTask of a JAX-native env ('gymnax:<id>'); its envs live on the device.

`RLTask(env='gymnax:CartPole-v1', ...)` builds one of these (RLTask's
constructor hands over), so a gin config switches backend by its env line
alone. Unlike the gymnasium task it stores no trajectories on the host: the
trainer collects inside its compiled epoch (RLTrainer.run_epoch), with
`rollout` and `epoch_slices` traced into the same call as the training, and only
the envs' state (`carry`, a pytree of device arrays) lives here between
epochs; it is checkpointed, so a resume continues the same episodes exactly.

With n_replay_epochs > 1 (DQN, AWR) the latest epochs' rollouts stay on the
device too, in a ring of epochs (rl.envs.gymnax_envs.Replay) that the compiled epoch
writes and samples, and that the checkpoint holds.

What this backend does not do (yet) is refused here or by the trainer with
one line: frame stacking, Atari preprocessing, segments cut at `max_steps`,
random initial trajectories, and epochs counted in trajectories rather than
env steps.
"""
import functools
from typing import NamedTuple, Optional

import flax
import jax
import jax.numpy as jnp
import numpy as np

from rl import compiler
from rl.envs import gymnax_envs as jax_envs
from rl import keys
from rl.errors import ConfigError
from rl.envs.gym_task import RLTask


class TaskCarry(NamedTuple):
  """The task's device state between epochs."""
  envs: jax_envs.EnvCarry
  replay: Optional[jax_envs.Replay]  # None unless n_replay_epochs > 1


class JaxTask(RLTask):
  """What RLTask's constructor makes of a 'gymnax:' env id (see the module doc).

  Not constructed directly: RLTask's constructor (gin-configured with the
  config's RLTask bindings) turns itself into one, so both backends read the
  same bindings. It overrides everything of RLTask that touches envs or
  stored trajectories.
  """

  jax_native = True

  def _setup_jax(self, env, env_kwargs, n_envs, gamma, max_steps, time_limit,
                 initial_trajectories, num_stacked_frames, atari_preprocessing, n_replay_epochs,
                 seed, dist_inputs_size):
    unsupported = [(name, value) for name, value, default in (
        ('max_steps', max_steps, None), ('initial_trajectories', initial_trajectories, 0),
        ('num_stacked_frames', num_stacked_frames, 1),
        ('atari_preprocessing', atari_preprocessing, False)) if value != default]
    if unsupported:
      name, value = unsupported[0]
      raise ConfigError(f'RLTask.{name} = {value!r} is not supported on JAX-native envs '
                        f'({env}) yet; remove the binding or use a gymnasium env id.')
    if n_envs < 1:
      raise ConfigError(f'RLTask.n_envs must be >= 1, got {n_envs}.')
    self.env_name = env
    self._env, self._params = jax_envs.make(env, env_kwargs, time_limit)
    self.n_envs = int(n_envs)
    self.gamma = float(gamma)
    self.max_steps = None
    self.time_limit = time_limit
    self.seed = int(seed)
    self.num_stacked_frames = 1
    self._n_replay_epochs = int(n_replay_epochs)
    self._dist_inputs_size = int(dist_inputs_size)
    self.observation_space = jax_envs.gymnasium_space(self._env.observation_space(self._params))
    self.frame_observation_space = self.observation_space
    self.action_space = jax_envs.gymnasium_space(self._env.action_space(self._params))
    self._episode_cap = int(self._params.max_steps_in_episode)
    self.epochs = {}
    self.n_interactions = 0
    self.n_trajectories = 0
    self.n_episodes = 0
    self.resume_warning = None
    _, env_key = keys.seed_and_folded(self.seed, 3)
    self.carry = TaskCarry(self._reset(env_key), None)
    self._play = {}

  @functools.cached_property
  def _reset(self):
    return compiler.jit(functools.partial(jax_envs.reset, self._env, self._params,
                                          n_envs=self.n_envs,
                                          obs_dtype=self.observation_space.dtype))

  # -- what the trainer traces into its epoch -----------------------------------------

  def rollout(self, act_fn, policy_params, acting, carry, sample_args, n_steps):
    """jax_envs.rollout on this task's envs (pure): (acting, TaskCarry, Rollout)."""
    acting, envs, rollout = jax_envs.rollout(self._env, self._params, self.action_space, act_fn,
                                             policy_params, acting, carry.envs, sample_args,
                                             n_steps)
    return acting, carry._replace(envs=envs), rollout

  def epoch_slices(self, carry, rollout):
    """The epoch's rollout as stored trajectories, and the replay with it (pure).

    Returns (carry, newest, replay, n_segments): the newest epoch's SliceData
    and that of every epoch the replay keeps (the newest alone when
    n_replay_epochs is 1, when nothing is kept between epochs).
    """
    newest, n_segments = jax_envs.rollout_slices(rollout, self.gamma)
    if self._n_replay_epochs == 1:
      return carry, newest, newest, n_segments
    # The ring was made before training (reserve_replay), so that every
    # epoch's call sees the same shapes and compiles once.
    replay = jax_envs.remember(carry.replay, newest, self._n_replay_epochs)
    return carry._replace(replay=replay), newest, jax_envs.replay_slices(replay), n_segments

  def reserve_replay(self, n_steps):
    """Makes the device ring of n_replay_epochs epochs of `n_steps` steps per env (if kept).

    Called by the trainer once it is built (the stored policy outputs' width
    is known then), before any epoch or restore.
    """
    if self._n_replay_epochs == 1 or self.carry.replay is not None:
      return
    envs = self.carry.envs
    shapes = jax.eval_shape(lambda: jax_envs.rollout_slices(
        jax_envs.Rollout(
            observation=jnp.zeros((n_steps,) + envs.obs.shape, envs.obs.dtype),
            action=jnp.zeros((n_steps, self.n_envs) + self.action_space.shape,
                             jax.dtypes.canonicalize_dtype(self.action_space.dtype)),
            reward=jnp.zeros((n_steps, self.n_envs), jnp.float32),
            dist_inputs=jnp.zeros((n_steps, self.n_envs, self._dist_inputs_size), jnp.float32),
            terminated=jnp.zeros((n_steps, self.n_envs), bool),
            ended=jnp.zeros((n_steps, self.n_envs), bool),
            final_obs=jnp.zeros((n_steps,) + envs.obs.shape, envs.obs.dtype),
            episode_return=jnp.zeros((n_steps, self.n_envs), jnp.float32)), self.gamma)[0])
    template = jax.tree_util.tree_map(lambda s: jnp.zeros(s.shape, s.dtype), shapes)
    self.carry = self.carry._replace(
        replay=compiler.jit(jax_envs.empty_replay, static_argnums=1)(
            template, self._n_replay_epochs))

  def record_epoch(self, n_steps, n_segments, episode_returns):
    """Host bookkeeping of a collected epoch (the counters RLTask keeps)."""
    self.n_interactions += int(n_steps)
    self.n_trajectories += int(n_segments)
    self.n_episodes += len(episode_returns)

  # -- RLTask's interface --------------------------------------------------------------

  def share_programs(self, other):
    self._play = other._play

  def set_dist_inputs_size(self, size):
    # Nothing collects before training here, so no check against a running collection.
    self._dist_inputs_size = int(size)

  def reserve_rows(self, n_rows):
    del n_rows  # the replay's ring has its full size from the start (reserve_replay)

  def collect_initial(self, policy_fn):
    del policy_fn  # initial_trajectories is refused on this backend

  def collect(self, *args, **kwargs):
    raise ConfigError(f'{self.env_name} is a JAX-native env: the trainer collects inside its '
                      'compiled epoch (RLTrainer.run_epoch), not through RLTask.collect.')

  def slice_data(self, *args, **kwargs):
    raise ConfigError(f'{self.env_name} is a JAX-native env: it stores no trajectories between '
                      'epochs, so there is no replay to slice.')

  def evaluate(self, policy, n_episodes, reset_seed, video_path=None):
    """Returns of `n_episodes` episodes played inside one compiled call.

    `policy` is the trainer's evaluation policy (rl.learner.base.HostPolicy),
    whose pure acting function and parameters are traced into the play loop;
    the resets are keyed by `reset_seed`, so an evaluation is reproducible.
    """
    if video_path is not None:
      raise ConfigError(f'{self.env_name} is a JAX-native env, which renders no frames; '
                        'evaluate it without --video.')
    play = self._play.get((policy.pure, n_episodes))
    if play is None:
      play = compiler.jit(functools.partial(
          jax_envs.play, self._env, self._params, self.action_space,
          self.observation_space.dtype, policy.pure, n_episodes=n_episodes,
          max_steps=self._episode_cap))
      self._play[(policy.pure, n_episodes)] = play
    returns = play(policy.params, policy.state, keys.seed_key(int(reset_seed)),
                   policy.sample_args)
    return np.asarray(returns, np.float64)

  def state_dict(self):
    """Arrays (the envs' state, observations, running returns, key; the replay) and counters."""
    envs = self.carry.envs
    arrays = {'envs': {'state': flax.serialization.to_state_dict(jax.device_get(envs.state)),
                       'obs': np.asarray(envs.obs),
                       'episode_return': np.asarray(envs.episode_return),
                       'key': keys.to_data(envs.key)}}
    if self.carry.replay is not None:
      # By leaf, in the tree's order: the SliceData inside has None fields,
      # which a checkpoint cannot hold.
      leaves = jax.tree_util.tree_leaves(jax.device_get(self.carry.replay))
      arrays['replay'] = {str(i): np.asarray(leaf) for i, leaf in enumerate(leaves)}
    meta = {'n_interactions': self.n_interactions, 'n_trajectories': self.n_trajectories,
            'n_episodes': self.n_episodes, 'epoch_keys': []}
    return arrays, meta

  def load_state_dict(self, arrays, meta):
    def restored(template, saved):
      template = jax.device_get(template)
      tree = flax.serialization.from_state_dict(template, saved)
      return jax.tree_util.tree_map(lambda t, r: jnp.asarray(r, dtype=np.asarray(t).dtype),
                                    template, tree)
    saved, envs = arrays['envs'], self.carry.envs
    envs = jax_envs.EnvCarry(
        restored(envs.state, saved['state']), jnp.asarray(saved['obs'], envs.obs.dtype),
        jnp.asarray(saved['episode_return'], jnp.float32),
        keys.from_data(saved['key'], 'env key'))
    replay = self.carry.replay
    if replay is not None:
      leaves, tree = jax.tree_util.tree_flatten(replay)
      saved = arrays['replay']
      replay = jax.tree_util.tree_unflatten(tree, [
          jnp.asarray(saved[str(i)], dtype=leaf.dtype) for i, leaf in enumerate(leaves)])
    self.carry = TaskCarry(envs, replay)
    self.n_interactions = meta['n_interactions']
    self.n_trajectories = meta['n_trajectories']
    self.n_episodes = meta['n_episodes']

  def close(self):
    pass
