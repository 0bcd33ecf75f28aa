"""RLTrainer: the options every trainer takes, and the Learner that runs its epochs.

An algorithm (rl.algorithms) is an RLTrainer whose constructor stores its
hyperparameters; `build()` then makes the Learner (rl.learner.learner), which
asks it, through the small interface of rl.learner.algorithm.Algorithm, which
networks to train, how to act and how to update them.
"""
import warnings
from typing import NamedTuple

from rl import ranges
from rl import traced_values
from rl.errors import ConfigError
from rl.learner.checks import check_backend
from rl.learner.learner import Learner

# The epoch when neither n_trajectories_per_epoch nor n_interactions_per_epoch is
# set: about 200 CartPole steps at first, enough episodes to normalise returns over.
DEFAULT_N_TRAJECTORIES_PER_EPOCH = 10
# The evaluation of a trainer given neither n_eval_episodes nor eval_every: a few
# greedy episodes every few epochs, so that every run has an eval return and
# ends with one, at a small share of its time.
DEFAULT_EVAL_EPISODES = 5
DEFAULT_EVAL_EVERY = 10


class LoopOptions(NamedTuple):
  """How a trainer's epochs collect and evaluate (RLTrainer's arguments)."""
  n_trajectories: int | None
  n_interactions: int | None
  n_eval_episodes: int
  eval_temperatures: tuple
  eval_every: int
  only_eval: bool


class RLTrainer:
  """Collects with the task, trains, evaluates, logs and checkpoints, epoch by epoch.

  Args:
    task: the RLTask (passed by the runner, not bindable in gin).
    n_trajectories_per_epoch: complete trajectories to collect per epoch.
    n_interactions_per_epoch: env steps to collect per epoch (a multiple of
      RLTask.n_envs). Give it or n_trajectories_per_epoch, not both; with
      neither, an epoch is DEFAULT_N_TRAJECTORIES_PER_EPOCH (10) complete
      trajectories.
    n_eval_episodes: evaluation episodes after an evaluating epoch's training
      (0: no evaluation); unbound, DEFAULT_EVAL_EPISODES (5).
    eval_temperatures: sampling temperatures of the evaluation; 0 is greedy
      and is logged as eval_return, others as eval_return_temperature_<T>.
    eval_every: evaluate after every this many epochs (and after the last);
      unbound, 1 when n_eval_episodes is bound and DEFAULT_EVAL_EVERY (10)
      when it is not.
    only_eval: collect and evaluate without training or storing trajectories.
    output_dir: the run's folder (passed by the runner).
    collect_per_epoch: the reference's name of n_trajectories_per_epoch.
  """

  # Network name -> the prefix of its learning_rate, gradients_l2 and steps_per_second.
  metric_prefixes = {'policy': 'policy_', 'value': 'value_'}
  # Whether the algorithm's epoch can run on JAX-native envs (it has `rollout_data`).
  supports_jax_envs = False
  # The latest epochs of trajectories the task keeps for the algorithm to train on.
  n_replay_epochs = 1
  # Parameters of a base class that this class's constructor sets itself: a
  # binding of one is refused (rl.configurables.declarations).
  fixed_parameters = ()

  def __init__(self, task, n_trajectories_per_epoch=None, n_interactions_per_epoch=None,
               n_eval_episodes=None, eval_temperatures=(0.0,), eval_every=None, only_eval=False,
               output_dir=None, collect_per_epoch=None):
    check_backend(self, task)
    if collect_per_epoch is not None:
      warnings.warn('collect_per_epoch is deprecated; use n_trajectories_per_epoch.',
                    DeprecationWarning, stacklevel=2)
      if n_trajectories_per_epoch is not None:
        raise ConfigError('give n_trajectories_per_epoch or its old alias '
                          'collect_per_epoch, not both.')
      n_trajectories_per_epoch = collect_per_epoch
    if n_trajectories_per_epoch is not None and n_interactions_per_epoch is not None:
      raise ConfigError(
          f'{type(self).__name__}: set exactly one of n_trajectories_per_epoch '
          f'(now {n_trajectories_per_epoch}) and n_interactions_per_epoch '
          f'(now {n_interactions_per_epoch}).')
    name = type(self).__name__
    ranges.in_range(f'{name}.n_trajectories_per_epoch', n_trajectories_per_epoch, low=1)
    ranges.in_range(f'{name}.n_interactions_per_epoch', n_interactions_per_epoch, low=1)
    ranges.in_range(f'{name}.n_eval_episodes', n_eval_episodes, low=0)
    ranges.in_range(f'{name}.eval_every', eval_every, low=1)
    if n_interactions_per_epoch is None and n_trajectories_per_epoch is None:
      n_trajectories_per_epoch = DEFAULT_N_TRAJECTORIES_PER_EPOCH
    if n_interactions_per_epoch is not None and n_interactions_per_epoch % task.n_envs:
      raise ConfigError(
          f'n_interactions_per_epoch ({n_interactions_per_epoch}) must be a multiple '
          f'of RLTask.n_envs ({task.n_envs}).')
    if eval_every is None:
      eval_every = DEFAULT_EVAL_EVERY if n_eval_episodes is None else 1
    if n_eval_episodes is None:
      n_eval_episodes = DEFAULT_EVAL_EPISODES
    self.task = task
    self.output_dir = output_dir
    self.options = LoopOptions(n_trajectories_per_epoch, n_interactions_per_epoch,
                               int(n_eval_episodes), tuple(float(t) for t in eval_temperatures),
                               int(eval_every), only_eval)
    self._check_jax_native()
    self._learner = None

  def _check_jax_native(self):
    """On JAX-native envs: epochs of env steps, no only_eval (else one line)."""
    if not self.task.jax_native:
      return
    name, env = type(self).__name__, self.task.env_name
    if self.options.n_interactions is None:
      raise ConfigError(
          f'{name} on JAX-native envs ({env}) collects a fixed number of env steps per '
          'epoch inside its compiled epoch: set n_interactions_per_epoch (a multiple of '
          'RLTask.n_envs) instead of n_trajectories_per_epoch.')
    if self.options.only_eval:
      raise ConfigError(f'only_eval is not supported on JAX-native envs ({env}) yet; '
                        'evaluate a run with rl.evaluate instead.')

  def build(self):
    """Makes the Learner: the networks, their initial states and the task's storage.

    Construction only stores the hyperparameters; the experiment builds the
    learner from the task and the algorithm before the run folder is written,
    and `learner` builds it on first use otherwise.
    """
    if self._learner is None:
      self._learner = Learner(self.task, self, self.options)
    return self._learner

  @property
  def learner(self):
    return self.build()

  # -- the Algorithm interface's defaults --------------------------------------------

  def initial_extra(self, networks):
    """Algorithm-specific arrays carried in the TrainState and checkpointed."""
    del networks
    return {}

  def sampling_args(self, temperature, epoch):
    """Extra traced arguments of the acting distribution's `sample` in `epoch`."""
    del temperature, epoch
    return ()

  def traced(self, parameter, constant):
    """`constant`, this trainer's `parameter`, as the epoch reads it: a traced value where a
    grid varies the parameter across the members of one program (rl.traced_values)."""
    return traced_values.value(type(self).__name__, parameter, constant)

  # -- running ----------------------------------------------------------------------

  @property
  def epoch(self):
    return self.learner.epoch

  @property
  def history(self):
    return self.learner.history

  def state_dict(self):
    return self.learner.state_dict()

  def load_state_dict(self, arrays, meta):
    self.learner.load_state_dict(arrays, meta)

  def close(self):
    self.learner.close()
