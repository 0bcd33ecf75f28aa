"""JaxTask: the task of a JAX-native env ('gymnax:<id>'); its envs live on the device.

`RLTask(env='gymnax:CartPole-v1', ...)` (rl.envs.task) builds one of these, so
a gin config switches backend by its env line alone. Unlike the gymnasium
task (rl.envs.gym_task) it stores no trajectories on the host: the
trainer collects inside its compiled epoch (RLTrainer.run_epoch), with
`rollout` and `epoch_slices` traced into the same call as the training, and only
the envs' state (`carry`, a pytree of device arrays) lives here between
epochs; it is checkpointed, so a resume continues the same episodes exactly.

When the trainer keeps n_replay_epochs > 1 (DQN, AWR) the latest epochs'
rollouts stay on the device too, in a ring of epochs (rl.data.replay_ring.Replay)
that the compiled epoch writes and samples, and that the checkpoint holds.

What this backend does not do (yet) is refused by the RLTask factory or by the
trainer with one line: frame stacking, Atari preprocessing, segments cut at
`max_steps`, random initial trajectories, and epochs counted in trajectories
rather than env steps.
"""
import functools
from typing import NamedTuple, Optional

import flax
import jax
import jax.numpy as jnp
import numpy as np

from rl import compiler
from rl import keys
from rl.data import replay_ring
from rl.envs import bookkeeping
from rl.envs import gymnax_envs as jax_envs
from rl.errors import ConfigError


class TaskCarry(NamedTuple):
  """The task's device state between epochs."""
  envs: jax_envs.EnvCarry
  replay: Optional[replay_ring.Replay]  # None unless the trainer replays (n_replay_epochs > 1)


class JaxTask:
  """Envs stepped on the device inside the trainer's compiled epoch, and their state.

  Implements rl.envs.task.Task; made by the RLTask factory, whose arguments
  (the RLTask gin bindings) are documented there. Besides the Task
  interface it gives the trainer's compiled epoch `rollout` and
  `epoch_slices` (pure) and holds their state between epochs in `carry`.
  """

  jax_native = True
  # Whole episodes of one frame each: neither segment cuts nor stacking here.
  max_steps = None
  num_stacked_frames = 1

  def __init__(self, env, env_kwargs=None, n_envs=8, gamma=0.99, time_limit=None, seed=0):
    self.env_name = env
    self._env, self._params = jax_envs.make(env, env_kwargs, time_limit)
    self.n_envs = int(n_envs)
    self.gamma = float(gamma)
    self.time_limit = time_limit
    self.seed = int(seed)
    self.observation_space = jax_envs.gymnasium_space(self._env.observation_space(self._params))
    self.frame_observation_space = self.observation_space
    self.action_space = jax_envs.gymnasium_space(self._env.action_space(self._params))
    self._episode_cap = int(self._params.max_steps_in_episode)
    self.needs = None  # the TaskNeeds of build_storage
    self.n_interactions = 0
    self.n_trajectories = 0
    self.n_episodes = 0
    self.resume_warning = None
    _, env_key = keys.seed_and_folded(self.seed, 3)
    self.carry = TaskCarry(self._reset(env_key), None)
    self._play = {}
    self._play_compiled = set()  # the keys of _play whose programs are compiled

  @functools.cached_property
  def _reset(self):
    return compiler.jit(functools.partial(jax_envs.reset, self._env, self._params,
                                          n_envs=self.n_envs,
                                          obs_dtype=self.observation_space.dtype))

  # -- the Task interface ------------------------------------------------------------

  def build_storage(self, needs):
    """Makes the device replay ring for what the trainer declares (an rl.envs.task.TaskNeeds).

    Called once, by the trainer, before any epoch or restore. A ring of
    needs.n_replay_epochs epochs of needs.steps_per_epoch steps per env when
    the trainer replays old epochs; nothing when it keeps the newest only.
    """
    self.needs = bookkeeping.checked_needs(self, needs)
    if needs.n_replay_epochs == 1:
      return
    if needs.steps_per_epoch is None:
      raise ValueError(f'a replay on JAX-native envs needs steps_per_epoch: {needs}')
    n_steps, envs = int(needs.steps_per_epoch), self.carry.envs
    shapes = jax.eval_shape(lambda: jax_envs.rollout_slices(
        jax_envs.Rollout(
            observation=jnp.zeros((n_steps,) + envs.obs.shape, envs.obs.dtype),
            action=jnp.zeros((n_steps, self.n_envs) + self.action_space.shape,
                             jax.dtypes.canonicalize_dtype(self.action_space.dtype)),
            reward=jnp.zeros((n_steps, self.n_envs), jnp.float32),
            dist_inputs=jnp.zeros((n_steps, self.n_envs, needs.dist_inputs_size), jnp.float32),
            terminated=jnp.zeros((n_steps, self.n_envs), bool),
            ended=jnp.zeros((n_steps, self.n_envs), bool),
            final_obs=jnp.zeros((n_steps,) + envs.obs.shape, envs.obs.dtype),
            episode_return=jnp.zeros((n_steps, self.n_envs), jnp.float32)), self.gamma)[0])
    template = jax.tree_util.tree_map(lambda s: jnp.zeros(s.shape, s.dtype), shapes)
    self.carry = self.carry._replace(
        replay=compiler.jit(replay_ring.empty_replay, static_argnums=1)(
            template, needs.n_replay_epochs))

  def share_programs(self, other):
    """Plays evaluations with `other`'s compiled functions (a task of the same config)."""
    self._play = other._play
    self._play_compiled = other._play_compiled

  def evaluate(self, policy, n_episodes, reset_seed, video_path=None):
    """Returns of `n_episodes` episodes played inside one compiled call.

    `policy` is the trainer's evaluation policy (rl.learner.acting.HostPolicy),
    whose pure acting function and parameters are traced into the play loop;
    the resets are keyed by `reset_seed`, so an evaluation is reproducible.
    """
    if video_path is not None:
      raise ConfigError(f'{self.env_name} is a JAX-native env, which renders no frames; '
                        'evaluate it without --video.')
    return np.asarray(self.play(policy, n_episodes, reset_seed), np.float64)

  def play(self, policy, n_episodes, reset_seed):
    """Starts `evaluate`'s episodes and returns their returns as a device array, not waited for
    (so that the caller can dispatch more work behind them)."""
    return self._play_program(policy.pure, n_episodes)(
        policy.params, policy.state, keys.seed_key(int(reset_seed)), policy.sample_args)

  def play_seeds(self, pure, params, states, reset_seeds, sample_args, n_episodes):
    """Every seed's returns, [seeds, n_episodes], from one vmapped call of the play loop, as
    a device array not waited for (as `play`).

    The arguments are what `play` takes from one seed's policy (its
    parameters, acting states and sample_args) stacked along a leading seed
    axis, with each seed's reset seed: a `--seeds` batch evaluates together
    (rl.seeds), and seed i's returns are those of its policy played alone.
    """
    play = self._play_program(pure, n_episodes, batched=True)
    return play(params, states, keys.seed_keys(reset_seeds), sample_args)

  def compile_evaluation(self, policy, n_episodes):
    """Compiles the program `evaluate(policy, n_episodes, ...)` plays, without playing it."""
    self._compile(self._play_program(policy.pure, n_episodes), (policy.pure, n_episodes, False),
                  policy.params, policy.state, keys.seed_key(0), policy.sample_args)

  def compile_evaluation_seeds(self, pure, params, states, sample_args, n_episodes):
    """Compiles the program of `play_seeds` for these stacked inputs, without playing it."""
    n_seeds = jax.tree_util.tree_leaves(params)[0].shape[0]
    self._compile(self._play_program(pure, n_episodes, batched=True), (pure, n_episodes, True),
                  params, states, keys.seed_keys([0] * n_seeds), sample_args)

  def _compile(self, play, name, *args):
    if name not in self._play_compiled:
      # jax.jit keeps the executable, so the first evaluation calls it as compiled.
      play.lower(*args).compile()
      self._play_compiled.add(name)

  def _play_program(self, pure, n_episodes, batched=False):
    """The jitted play loop of the acting function `pure`, made once per (function, episodes,
    vmapped over seeds or not)."""
    play = self._play.get((pure, n_episodes, batched))
    if play is None:
      play = functools.partial(
          jax_envs.play, self._env, self._params, self.action_space,
          self.observation_space.dtype, pure, n_episodes=n_episodes,
          max_steps=self._episode_cap)
      play = compiler.jit(jax.vmap(play) if batched else play)
      self._play[(pure, n_episodes, batched)] = play
    return play

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
    meta = {**bookkeeping.counters(self), 'epoch_keys': []}
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
    bookkeeping.load_counters(self, meta)

  def eval_env(self):
    """(env, env_params): the gymnax env that evaluation plays and its parameters."""
    return self._env, self._params

  def close(self):
    """Nothing to release: the envs are arrays the carry holds."""

  # -- what the trainer traces into its epoch -----------------------------------------

  def rollout(self, act_fn, noise_fn, policy_params, acting, carry, sample_args, n_steps):
    """jax_envs.rollout on this task's envs (pure): (acting, TaskCarry, Rollout)."""
    acting, envs, rollout = jax_envs.rollout(self._env, self._params, self.action_space, act_fn,
                                             noise_fn, policy_params, acting, carry.envs,
                                             sample_args, n_steps)
    return acting, carry._replace(envs=envs), rollout

  def epoch_slices(self, carry, rollout):
    """The epoch's rollout as stored trajectories, and the replay with it (pure).

    Returns (carry, newest, replay, n_segments): the newest epoch's SliceData
    and that of every epoch the replay keeps (the newest alone when
    n_replay_epochs is 1, when nothing is kept between epochs).
    """
    newest, n_segments = jax_envs.rollout_slices(rollout, self.gamma)
    n_replay_epochs = self.needs.n_replay_epochs
    if n_replay_epochs == 1:
      return carry, newest, newest, n_segments
    # The ring was made before training (build_storage), so that every
    # epoch's call sees the same shapes and compiles once.
    replay = replay_ring.remember(carry.replay, newest, n_replay_epochs)
    return carry._replace(replay=replay), newest, replay_ring.replay_slices(replay), n_segments

  def record_epoch(self, n_steps, n_segments, episode_returns):
    """Host bookkeeping of a collected epoch (the counters every task keeps)."""
    self.n_interactions += int(n_steps)
    self.n_trajectories += int(n_segments)
    self.n_episodes += len(episode_returns)
