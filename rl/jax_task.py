"""JaxTask: the RLTask of a JAX-native env ('gymnax:<id>'); its envs live on the device.

`RLTask(env='gymnax:CartPole-v1', ...)` builds one of these (RLTask's
constructor hands over), so a gin config switches backend by its env line
alone. Unlike the gymnasium task it stores no trajectories: the trainer
collects inside its compiled epoch (RLTrainer.run_epoch), with `rollout`
and `rollout_slices` traced into the same call as the training, and only
the envs' state (`carry`, a pytree of device arrays) lives here between
epochs; it is checkpointed, so a resume continues the same episodes exactly.

What this backend does not do (yet) is refused here or by the trainer with
one line: frame stacking, Atari preprocessing, segments cut at `max_steps`,
random initial trajectories, replay over several epochs, and epochs counted
in trajectories rather than env steps.
"""
import functools

import flax
import jax
import jax.numpy as jnp
import numpy as np

from rl import jax_envs
from rl import keys
from rl.errors import ConfigError
from rl.task import RLTask


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
    self.carry = self._reset(env_key)
    self._play = {}

  @functools.cached_property
  def _reset(self):
    return jax.jit(functools.partial(jax_envs.reset, self._env, self._params, n_envs=self.n_envs,
                                     obs_dtype=self.observation_space.dtype))

  # -- what the trainer traces into its epoch -----------------------------------------

  def rollout(self, act_fn, policy_params, acting, carry, sample_args, n_steps):
    """jax_envs.rollout on this task's envs (pure): (acting, carry, Rollout)."""
    return jax_envs.rollout(self._env, self._params, self.action_space, act_fn, policy_params,
                            acting, carry, sample_args, n_steps)

  def rollout_slices(self, rollout):
    """jax_envs.rollout_slices with this task's gamma (pure): (SliceData, n_segments)."""
    return jax_envs.rollout_slices(rollout, self.gamma)

  def record_epoch(self, n_steps, n_segments, episode_returns):
    """Host bookkeeping of a collected epoch (the counters RLTask keeps)."""
    self.n_interactions += int(n_steps)
    self.n_trajectories += int(n_segments)
    self.n_episodes += len(episode_returns)

  # -- RLTask's interface --------------------------------------------------------------

  def share_programs(self, other):
    self._play = other._play

  def set_dist_inputs_size(self, size):
    self._dist_inputs_size = int(size)

  def set_n_replay_epochs(self, n):
    self._n_replay_epochs = int(n)

  @property
  def n_replay_epochs(self):
    return self._n_replay_epochs

  def reserve_rows(self, n_rows):
    del n_rows  # nothing is stored between epochs

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

    `policy` is the trainer's evaluation policy (rl.trainers.base.HostPolicy),
    whose pure acting function and parameters are traced into the play loop;
    the resets are keyed by `reset_seed`, so an evaluation is reproducible.
    """
    if video_path is not None:
      raise ConfigError(f'{self.env_name} is a JAX-native env, which renders no frames; '
                        'evaluate it without --video.')
    play = self._play.get((policy.pure, n_episodes))
    if play is None:
      play = jax.jit(functools.partial(
          jax_envs.play, self._env, self._params, self.action_space,
          self.observation_space.dtype, policy.pure, n_episodes=n_episodes,
          max_steps=self._episode_cap))
      self._play[(policy.pure, n_episodes)] = play
    returns = play(policy.params, policy.state, keys.seed_key(int(reset_seed)),
                   policy.sample_args)
    return np.asarray(returns, np.float64)

  def state_dict(self):
    """Arrays (the envs' state, observations, running returns, key) and counters."""
    carry = self.carry
    arrays = {'envs': {'state': flax.serialization.to_state_dict(jax.device_get(carry.state)),
                       'obs': np.asarray(carry.obs),
                       'episode_return': np.asarray(carry.episode_return),
                       'key': keys.to_data(carry.key)}}
    meta = {'n_interactions': self.n_interactions, 'n_trajectories': self.n_trajectories,
            'n_episodes': self.n_episodes, 'epoch_keys': []}
    return arrays, meta

  def load_state_dict(self, arrays, meta):
    envs = arrays['envs']
    template = jax.device_get(self.carry.state)
    state = flax.serialization.from_state_dict(template, envs['state'])
    state = jax.tree_util.tree_map(lambda t, r: jnp.asarray(r, dtype=np.asarray(t).dtype),
                                   template, state)
    self.carry = jax_envs.EnvCarry(
        state, jnp.asarray(envs['obs'], self.carry.obs.dtype),
        jnp.asarray(envs['episode_return'], jnp.float32),
        keys.from_data(envs['key'], 'env key'))
    self.n_interactions = meta['n_interactions']
    self.n_trajectories = meta['n_trajectories']
    self.n_episodes = meta['n_episodes']

  def close(self):
    pass
