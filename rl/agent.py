"""A trained run's policy, to call from Python: `agent = load('runs/ppo')`, `agent.act(obs)`.

`load` rebuilds the run from its saved operative config (<output_dir>/config.gin)
and restores its newest checkpoint (or the one of the epoch asked for), as
rl.evaluate does, writing nothing into the folder. The Agent acts as the
run's evaluation does: the acting network with its normaliser statistics
frozen, greedy at temperature 0 (the most likely action, the Gaussian's mean,
argmax Q), sampled at a positive temperature (DQN: epsilon-greedy with the
checkpoint epoch's epsilon). `make_env` gives the envs the evaluation plays
on, with the run's wrappers, so their observations are what the policy was
trained on. docs/agent.md shows it in use.
"""
import os

import gin
import numpy as np

from rl import config
from rl import experiment
from rl import keys
from rl import run_folder
from rl import run_settings
from rl.data.checkpoints import Checkpointer
from rl.envs.task import RLTask
from rl.errors import ConfigError
from rl.errors import OutputDirError
from rl.run_folder import CHECKPOINT_DIR
from rl.run_folder import CONFIG_FILE


def read_checkpoint(output_dir, epoch=None, name_one='evaluate one of them, e.g. '
                    '--output_dir={}'):
  """(the path of its config.gin, (epoch, arrays, meta) of a checkpoint) of the run in
  `output_dir`, read only: its newest readable checkpoint, or the one of `epoch`.

  name_one: what the error for a --seeds parent folder asks for, '{}' standing
  for the first seed's folder.

  Raises:
    OutputDirError: no run folder, config or checkpoint (of `epoch`).
  """
  if os.path.exists(output_dir) and not os.path.isdir(output_dir):
    raise OutputDirError(f"'{output_dir}' is a file, not a run folder; pass a run's "
                         '--output_dir.')
  if not os.path.isdir(output_dir):
    raise OutputDirError(f"run folder '{output_dir}' does not exist; pass a run's "
                         '--output_dir.')
  config_path = os.path.join(output_dir, CONFIG_FILE)
  if not os.path.isfile(config_path):
    seeds = run_folder.seeds_in(output_dir)
    if seeds:
      first = run_folder.seed_folder(output_dir, seeds[0])
      raise OutputDirError(
          f"'{output_dir}' holds the runs of --seeds={run_folder.seeds_flag(seeds)}, a folder "
          f'each; {name_one.format(first)}.')
    raise OutputDirError(f"'{output_dir}' has no {CONFIG_FILE}; is it a run folder?")
  checkpoint_dir = os.path.join(output_dir, CHECKPOINT_DIR)
  # Checked before orbax sees the folder: it would log a failure for a missing one.
  restored = None
  if os.path.isdir(checkpoint_dir):
    checkpointer = Checkpointer(checkpoint_dir, read_only=True)
    try:
      restored = checkpointer.restore_latest() if epoch is None else _restore_epoch(
          checkpointer, output_dir, epoch)
    finally:
      checkpointer.close()
  if restored is None:
    raise OutputDirError(f"'{output_dir}' has no readable checkpoint; train the run first.")
  return config_path, restored


def _restore_epoch(checkpointer, output_dir, epoch):
  steps = checkpointer.all_steps()
  if epoch not in steps:
    kept = ', '.join(map(str, steps)) or 'none'
    raise OutputDirError(f"'{output_dir}' has no checkpoint of epoch {epoch} (it keeps the "
                         f'epochs {kept}); pass one of them, or None for the newest.')
  try:
    return checkpointer.restore(epoch)
  except Exception as e:  # pylint: disable=broad-except
    raise OutputDirError(f"the checkpoint of epoch {epoch} in '{output_dir}' cannot be read "
                         f'({type(e).__name__}); pass another epoch.') from None


def rebuild(output_dir, config_path, checkpoint):
  """The run's Learner, built from `config_path` with `checkpoint` (read_checkpoint's) loaded.

  The process's gin config becomes the run's. Nothing is written into
  `output_dir`; the caller closes the learner.

  Raises:
    ConfigError: the saved config cannot be built, or the checkpoint does not fit it.
  """
  _, arrays, meta = checkpoint
  gin.clear_config()
  config.parse_config([config_path], [])
  run_settings.configure_compiler(meta)  # the kernels the run trained with
  task = config.construct(RLTask)
  # output_dir=None: a trainer given the folder might write into it.
  learner = config.construct(experiment.train_rl, output_dir=None, task=task).trainer.learner
  try:
    learner.load_state_dict(arrays, meta)
  except (ValueError, KeyError, TypeError) as e:
    learner.close()
    reason = config.first_sentence(str(e))[:200]
    raise ConfigError(f"the checkpoint in '{output_dir}' does not fit its "
                      f'{CONFIG_FILE} ({reason}).') from None
  return learner


def load(output_dir, epoch=None, seed=0):
  """The trained policy of the run in `output_dir`, as an Agent.

  Args:
    output_dir: the run folder (a run's --output_dir; one seed's folder of a --seeds run).
    epoch: the epoch of the checkpoint to restore (the folder keeps the last
      few); None: the newest.
    seed: seeds the Agent's own sampling key (act's draws at a positive
      temperature when no seed is given to the call).

  The process's gin config becomes the run's (as in rl.evaluate). Nothing is
  written into the folder: no lock, no metrics, no checkpoint clean-up.

  Raises:
    OutputDirError: no run folder, config or checkpoint (of `epoch`).
    ConfigError: the saved config or checkpoint cannot be used.
  """
  config_path, checkpoint = read_checkpoint(output_dir, epoch,
                                            name_one="load one of them, e.g. load('{}')")
  return Agent(rebuild(output_dir, config_path, checkpoint), seed)


class Agent:
  """A run's trained policy and the envs its evaluation plays (made by `load`).

  Attributes:
    epoch: the restored checkpoint's epoch.
    env_id: the run's RLTask.env.
    jax_native: whether that env is a JAX-native (gymnax) one.
    observation_space, action_space: gymnasium spaces of one observation and
      one action.
    learner: the restored rl.learner.learner.Learner, for what this class
      does not cover (e.g. `learner.episode_returns(0.0)`, the run's evaluation).
  """

  def __init__(self, learner, seed=0):
    self.learner = learner
    self.epoch = learner.epoch
    task = learner.task
    self.env_id = task.env_name
    self.jax_native = task.jax_native
    self.observation_space = task.observation_space
    self.action_space = task.action_space
    self._key = keys.seed_key(seed)

  def act(self, obs, temperature=0.0, seed=None):
    """The policy's action for one observation, or actions [B, ...] for a batch [B, ...].

    Args:
      obs: an observation of `observation_space`'s shape, or a batch of them
        along a leading axis (numpy or JAX arrays, or nested lists).
      temperature: 0 is greedy, the action the run's greedy evaluation
        takes; a positive temperature samples (1: as training collected).
      seed: an integer or a JAX key that makes this call's draws; None: the
        Agent's own key, which every call advances (seeded by `load`).

    Returns:
      A numpy array: the action (Box actions as the policy gives them,
      not clipped to the space's bounds), or one per observation.
    """
    space = self.observation_space
    obs = np.asarray(obs, space.dtype)
    single = obs.shape == space.shape
    if not single and obs.shape[1:] != space.shape:
      batch = ', '.join(['B', *map(str, space.shape)])
      raise ConfigError(f'an observation of shape {obs.shape} does not fit {self.env_id}, whose '
                        f'observations are {space.shape}: pass one of them or a batch [{batch}].')
    if not temperature >= 0:
      raise ConfigError(f'temperature must be >= 0 (0: greedy), got {temperature}.')
    if seed is None:
      key = self._key
    else:
      key = seed if keys.is_key(seed) else keys.seed_key(seed)
    policy = self.learner.eval_policy(float(temperature), key)
    actions, _ = policy(obs[None] if single else obs)
    if seed is None:
      self._key = policy.state.key
    return actions[0] if single else actions

  def make_env(self, n_envs=None):
    """A new env as the run's evaluation plays it: its observations are the policy's inputs.

    Gymnasium runs: one gymnasium env with the run's eval wrappers (frame
    stacking, Atari preprocessing, the context window of a sequence policy),
    or with `n_envs` the vector env of that many copies that the evaluation
    plays on (rl.evaluate). The caller closes it.

    JAX-native runs: (env, env_params), the gymnax env and its parameters
    (`env.reset(key, env_params)`, `env.step(key, state, action, env_params)`;
    jax.vmap them for a batch); n_envs must be None.
    """
    if not self.jax_native:
      return self.learner.task.eval_env(n_envs)
    if n_envs is not None:
      raise ConfigError(f'{self.env_id} is a JAX-native env: make_env() gives the gymnax env and '
                        'its parameters; jax.vmap its reset and step for a batch.')
    return self.learner.task.eval_env()

  def close(self):
    """Releases the run's envs (the training and eval envs the learner built)."""
    self.learner.close()

  def __enter__(self):
    return self

  def __exit__(self, *exc_info):
    self.close()
