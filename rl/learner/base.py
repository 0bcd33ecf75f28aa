"""RLTrainer: the epoch loop every trainer shares.

One epoch: collect (temperature 1, normaliser statistics updated), train,
evaluate (greedy and at other temperatures, on separate envs), log, and every
few epochs checkpoint. Evaluation comes *after* training — a departure from
the reference, whose eval saw the policy before the epoch's update — so the
last logged eval is the policy in the last checkpoint.

Construction is explicit (see RLTrainer): configuration, then the networks
and the functions that use them. Acting is a pure function of (params,
ActingState, obs). Training is a pure function too, `update(TrainState,
data)`: every network of the epoch, each a fused loop that draws its batches
on the device (rl.learner.network_trainer.fused_epoch), in one compiled call. On
gymnasium envs the host collects and then calls it; on JAX-native envs
(rl.envs.jax_task) `jax_epoch` traces collection and `update` into one program.
"""
import functools
import time
import warnings
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from rl import compiler
from rl import keys
from rl import metrics as metrics_lib
from rl.data import packing
from rl.envs.task import TaskNeeds
from rl.learner import network_trainer as supervised
from rl.errors import ConfigError


# Metrics every supervised Trainer reports; a trainer with several networks
# prefixes them with the network's name so they don't collide.
TRAINER_METRICS = ('learning_rate', 'gradients_l2', 'steps_per_second')


def prefix_trainer_metrics(metrics, prefix):
  """`metrics` with learning_rate etc. renamed prefix + name (e.g. value_learning_rate)."""
  return {(prefix + k if k in TRAINER_METRICS else k): v for k, v in metrics.items()}


# The epoch when neither n_trajectories_per_epoch nor n_interactions_per_epoch is
# set: about 200 CartPole steps at first, enough episodes to normalise returns over.
DEFAULT_N_TRAJECTORIES_PER_EPOCH = 10


def check_on_policy(trainer, n_replay_epochs, alternative):
  """On-policy trainers learn from the newest epoch only; replay would bias them."""
  if trainer.on_policy and n_replay_epochs != 1:
    raise ConfigError(f'{type(trainer).__name__} is on-policy: n_replay_epochs must be 1, '
                      f'got {n_replay_epochs}. Use {alternative} to replay old epochs.')


def check_estimator_margin(trainer, estimator, margin):
  """Bootstrapping estimators need at least one step after the trained ones."""
  from rl.ops import advantages  # pylint: disable=import-outside-toplevel
  if margin < 1 and estimator is not advantages.monte_carlo:
    raise ConfigError(
        f'{type(trainer).__name__}: the advantage estimator bootstraps from the values of '
        f'later steps, so added_policy_slice_length must be >= 1 (got {margin}); set it, '
        'or use advantage_estimator = @monte_carlo.')


def check_whole_episodes(trainer, task, collection, alternative=''):
  """Monte-Carlo returns are only right on whole episodes; refuses cut segments.

  A stored return sums the rewards to the end of its segment with nothing
  after it. Collection cuts a running episode at an epoch's end when epochs
  are counted in env steps (n_interactions_per_epoch) and every
  RLTask.max_steps steps, and a return on such a segment would stop at the
  cut as if the episode had ended there.

  Args:
    trainer: the trainer being built (named in the message).
    task: its RLTask.
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


# The trainers whose epoch runs on JAX-native envs (RLTrainer.supports_jax_envs).
JAX_NATIVE_TRAINERS = ('A2C, PPO, AWR, SamplingAWR, A2CJoint, PPOJoint, AWRJoint, DQN '
                       'or DoubleDQN')


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


class ActingState(NamedTuple):
  """What acting carries from one env step to the next."""
  key: jax.Array  # the sampling key
  model_state: dict  # the acting model's normaliser statistics ({} without one)


def act(apply_fn, dist, output_fn, params, acting_state, obs, sample_args, temperature,
        update):
  """One batched action: (actions, dist_inputs, acting_state); pure.

  Args:
    apply_fn, dist, output_fn: the acting model's apply, its distribution and
      model output -> dist_inputs [B, L, k] (bound before jitting).
    params: the acting parameters.
    acting_state: an ActingState.
    obs: [B, ...] observations.
    sample_args: extra traced arguments of `dist.sample` (e.g. epsilon).
    temperature: sampling temperature (0: greedy).
    update: fold `obs` into the normaliser statistics (training collection).
  """
  model_state = acting_state.model_state
  variables = {'params': params, **model_state}
  if update and model_state:
    out, model_state = apply_fn(variables, obs[:, None], update_normalizer=True,
                                mutable=list(model_state))
    model_state = dict(model_state)
  else:
    out = apply_fn(variables, obs[:, None])
  dist_inputs = output_fn(out)[:, -1]
  key, sample_key = jax.random.split(acting_state.key)
  actions = dist.sample(dist_inputs, sample_key, temperature, *sample_args)
  return actions, dist_inputs, ActingState(key, model_state)


class TrainState(NamedTuple):
  """Everything a trainer's epoch reads and writes, as one pytree.

  `RLTrainer.update` takes one and returns the next; the gymnasium backend
  calls it once per epoch after collecting on the host, the JAX-native one
  (rl.envs.gymnax_envs) traces it into the same compiled call as the collection.
  """
  nets: dict  # network name -> its supervised state {'params', 'model_state', 'opt_state', 'step'}
  train_key: jax.Array  # draws the training batches
  acting: ActingState  # collection key and normaliser statistics
  extra: dict  # trainer-specific arrays (DQN's target network), checkpointed


class _Ahead(NamedTuple):
  """A JAX-native epoch dispatched before its turn (see RLTrainer._epoch_outputs)."""
  epoch: int
  inputs: list  # the arrays it started from
  outputs: tuple  # jax_epoch's outputs (futures until read)


def _same_arrays(a, b):
  """Whether two lists hold the very same array objects."""
  return len(a) == len(b) and all(x is y for x, y in zip(a, b))


class HostPolicy:
  """Adapts a pure acting function to the task's host loop: obs -> (actions, dist_inputs).

  The env loop steps on the host, one batched call per step; this object
  threads the acting state through those calls, and `state` is read back
  once the loop is over.
  """

  def __init__(self, act_fn, params, state, sample_args, pure=None):
    self._act = act_fn
    self.params = params
    self.sample_args = sample_args
    self.state = state
    # The same acting function unjitted (its static arguments bound), for a
    # caller that traces it into its own compiled loop (rl.envs.jax_task's evaluation).
    self.pure = pure

  def __call__(self, obs):
    actions, dist_inputs, self.state = self._act(self.params, self.state, obs,
                                                 self.sample_args)
    return np.asarray(actions), np.asarray(dist_inputs)


class _BuiltAfterConfiguration(type):
  """Builds a trainer once every constructor in its class chain has run.

  Construction has two explicit phases: every `__init__` only checks and
  stores its configuration (in any order relative to `super().__init__`),
  then `build_networks()` makes the networks, their supervised trainers and
  the jitted functions that read them, with the whole configuration in
  place, then `initialize_networks()` makes every network's initial state
  in one compiled call. No constructor can see a half-configured trainer.
  """

  def __call__(cls, *args, **kwargs):
    trainer = super().__call__(*args, **kwargs)
    trainer.check_jax_native()
    trainer.build_networks()
    trainer.initialize_networks()
    trainer.task.build_storage(trainer.task_needs())
    return trainer


class RLTrainer(metaclass=_BuiltAfterConfiguration):
  """Collects with the task, trains, evaluates, logs and checkpoints, epoch by epoch.

  Subclasses store their configuration in `__init__`, make their networks in
  `build_networks` (ending with `set_acting_model`), say what an epoch trains
  on (`epoch_data` from the task's buffer, `rollout_data` on JAX-native envs)
  and train in `update`, a pure function of the TrainState that draws the
  epoch's batches on the device with its training key.

  Class attribute `summary_dirs` ({subfolder: metric key prefix}) routes a
  sub-network's TensorBoard scalars into their own folder of the run.

  Args:
    task: the RLTask (passed by the runner, not bindable in gin).
    n_trajectories_per_epoch: complete trajectories to collect per epoch.
    n_interactions_per_epoch: env steps to collect per epoch (a multiple of
      RLTask.n_envs). Give at most one of the two. With neither, an epoch is
      DEFAULT_N_TRAJECTORIES_PER_EPOCH (10) complete trajectories: whole
      episodes suit every trainer, those that learn from Monte-Carlo returns
      included.
    n_eval_episodes: greedy evaluation episodes after each epoch's training
      (0: no evaluation).
    eval_temperatures: sampling temperatures of the evaluation; 0 is greedy
      and is logged as eval_return, others as eval_return_temperature_<T>.
    eval_every: evaluate after every this many epochs (and after the last);
      evaluation episodes can cost more than a short epoch's training.
    only_eval: collect and evaluate without training or storing trajectories.
    output_dir: the run's folder (passed by the runner).
    collect_per_epoch: deprecated alias of n_trajectories_per_epoch.
  """

  summary_dirs = {}
  # Epochs of trajectories the task keeps (TaskNeeds); replaying trainers set their own.
  n_replay_epochs = 1
  # Whether the trainer's epoch can run on JAX-native envs (rl.envs.jax_task):
  # it needs `rollout_data`.
  supports_jax_envs = False

  def __init__(self, task, n_trajectories_per_epoch=None, n_interactions_per_epoch=None,
               n_eval_episodes=0, eval_temperatures=(0.0,), eval_every=1, only_eval=False,
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
    if n_interactions_per_epoch is None and n_trajectories_per_epoch is None:
      n_trajectories_per_epoch = DEFAULT_N_TRAJECTORIES_PER_EPOCH
    if n_interactions_per_epoch is not None and n_interactions_per_epoch % task.n_envs:
      raise ConfigError(
          f'n_interactions_per_epoch ({n_interactions_per_epoch}) must be a multiple '
          f'of RLTask.n_envs ({task.n_envs}).')
    self.task = task
    self._n_trajectories = n_trajectories_per_epoch
    self._n_interactions = n_interactions_per_epoch
    self._n_eval_episodes = int(n_eval_episodes)
    self._eval_temperatures = tuple(float(t) for t in eval_temperatures)
    self._eval_every = int(eval_every)
    self._last_epoch = None  # set by run(): the last epoch is always evaluated
    # JAX-native envs: the _Ahead epoch dispatched before its turn, if any.
    self._ahead = None
    self._only_eval = only_eval
    self.output_dir = output_dir
    self.epoch = 0
    self.history = []
    self._trainers = {}  # name -> supervised.Trainer, checkpointed together
    # The collection key is the seed's; the training key draws the training
    # batches (and any sampling inside the losses' inputs). The acting
    # normaliser statistics come with the networks (initialize_networks).
    seed_key, self.train_key = keys.seed_and_folded(task.seed, 2)
    self._acting = ActingState(seed_key, {})
    self._extra = {}
    # One compiled call trains every network of an epoch (see `update`); its
    # metrics come back to the host in one transfer (rl.data.packing).
    self._update = packing.PackedJit(self._update_then_metrics)

  # -- construction -----------------------------------------------------------------

  # The largest replay reserved up front (rows). Padding costs every epoch
  # what the reserved size costs, so a large replay (pixels, a million
  # steps) grows with its contents instead.
  MAX_RESERVED_ROWS = 2**17

  def check_jax_native(self):
    """On JAX-native envs: epochs of env steps, no only_eval (else one line)."""
    if not self.task.jax_native:
      return
    name, env = type(self).__name__, self.task.env_name
    if self._n_interactions is None:
      raise ConfigError(
          f'{name} on JAX-native envs ({env}) collects a fixed number of env steps per '
          'epoch inside its compiled epoch: set n_interactions_per_epoch (a multiple of '
          'RLTask.n_envs) instead of n_trajectories_per_epoch.')
    if self._only_eval:
      raise ConfigError(f'only_eval is not supported on JAX-native envs ({env}) yet; '
                        'evaluate a run with rl.evaluate instead.')

  def task_needs(self):
    """What the task must store for this trainer (rl.envs.task.TaskNeeds).

    A replay of n_replay_epochs > 1 epochs of n_interactions_per_epoch steps
    ends up with n_replay_epochs * n_interactions_per_epoch steps (plus
    final-observation rows, which the capacity bucket's rounding covers).
    Reserved from the start, the training epoch compiles once for it rather
    than at every capacity bucket the filling buffer would pass.
    """
    rows = 0
    if self._n_interactions is not None and self.n_replay_epochs > 1:
      rows = self.n_replay_epochs * self._n_interactions
      rows = rows if rows <= self.MAX_RESERVED_ROWS else 0
    return TaskNeeds(
        n_replay_epochs=self.n_replay_epochs, dist_inputs_size=self._act_dist.n_inputs,
        reserved_rows=rows,
        steps_per_epoch=self.jax_epoch_steps if self.task.jax_native else None)

  def build_networks(self):
    """Makes the networks and their supervised trainers; ends with set_acting_model.

    The networks' states do not exist yet (initialize_networks makes them);
    what needs them goes in `networks_initialized`.
    """
    raise NotImplementedError(f'{type(self).__name__} is a base class, not a trainer')

  def initialize_networks(self):
    """Every network's initial state, in one compiled call; then networks_initialized.

    The acting normaliser statistics start from the acting network's initial ones.
    """
    supervised.initialize_together(list(self._trainers.values()))
    self._acting = ActingState(self._acting.key, jax.tree_util.tree_map(
        jnp.asarray, dict(self._acting_trainer.model_state)))
    self.networks_initialized()

  def networks_initialized(self):
    """Runs once the networks have their initial states (e.g. to copy a target network)."""

  # -- acting -----------------------------------------------------------------------

  def set_acting_model(self, trainer, dist, output_fn=lambda out: out):
    """Declares how the trainer acts: with supervised `trainer`'s network and `dist`.

    Args:
      trainer: the supervised Trainer whose network acts; its initial model
        state starts the acting normaliser statistics (initialize_networks).
      dist: the action distribution.
      output_fn: model output -> dist_inputs [B, L, k] (e.g. the policy head
        of a PolicyAndValue).
    """
    self._act_dist = dist
    self._acting_trainer = trainer
    pure = functools.partial(act, trainer.spec.apply_fn, dist, output_fn)
    self._act_pure = pure
    self._eval_acts = {}
    self._acting_name = next(name for name, t in self._trainers.items() if t is trainer)
    self._act = compiler.jit(pure, static_argnames=('temperature', 'update'))
    # The collect loop's call, with its static arguments bound once: dispatch
    # then skips hashing keyword arguments on every env step.
    self._act_collect = compiler.jit(functools.partial(pure, temperature=1.0, update=True))

  def share_programs(self, other):
    """Acts and evaluates with `other`'s functions, so nothing compiles twice.

    For trainers of one config that differ only in their seed (rl.seeds):
    their acting functions are the same computation on other parameters.
    """
    self._act_pure, self._eval_acts = other._act_pure, other._eval_acts
    self._act, self._act_collect = other._act, other._act_collect
    self.task.share_programs(other.task)

  @property
  def acting_state(self):
    """The ActingState: collection key and normaliser statistics."""
    return self._acting

  def random_policy(self):
    """The policy of the random initial trajectories (RLTask.initial_trajectories).

    Discrete actions are uniform draws from the task's generator, stored
    with zero logits (the uniform distribution itself). Continuous actions
    come from the acting Gaussian at `spread_inputs` (wide, centred on the
    box) with the collection key, and those inputs are stored: off-policy
    losses then see the density the actions were really drawn from.
    """
    dist = self._act_dist
    if not hasattr(dist, 'spread_inputs'):
      return self.task.random_policy
    inputs = dist.spread_inputs(self.task.action_space)

    def spread(params, state, obs, sample_args):
      del params, sample_args
      dist_inputs = jnp.broadcast_to(inputs, (obs.shape[0], inputs.shape[0]))
      key, sample_key = jax.random.split(state.key)
      return dist.sample(dist_inputs, sample_key, 1.0), dist_inputs, state._replace(key=key)
    return HostPolicy(spread, None, self._acting, ())

  def collect_initial(self):
    """Collects the task's random initial trajectories (epoch 0), if it has any."""
    if self.task.jax_native:
      return  # JAX-native tasks collect inside the epoch and refuse initial trajectories
    policy = self.random_policy()
    self.task.collect_initial(policy)
    if isinstance(policy, HostPolicy):
      self._acting = policy.state

  def sampling_args(self, temperature, epoch=None):
    """Extra traced arguments of `dist.sample` when acting in `epoch` (default: the
    current one), e.g. DQN's epsilon."""
    del temperature, epoch
    return ()

  def collect_policy(self):
    """The policy of training collection: temperature 1, statistics updated."""
    return HostPolicy(self._act_collect, self._acting_trainer.variables['params'],
                      self._acting, self.sampling_args(1.0))

  def collect(self, n_trajectories=None, n_interactions=None, epoch_id=None, only_eval=False):
    """Collects with `collect_policy` into epoch `epoch_id` (default: the current one).

    Returns the task's collection stats; the acting state moves on.
    """
    policy = self.collect_policy()
    stats = self.task.collect(policy, n_trajectories=n_trajectories,
                              n_interactions=n_interactions,
                              epoch_id=max(self.epoch, 1) if epoch_id is None else epoch_id,
                              only_eval=only_eval)
    self._acting = policy.state
    return stats

  def eval_policy(self, temperature, key):
    """A policy at `temperature` with its own key stream; statistics frozen."""
    act_fn = functools.partial(self._act, temperature=temperature, update=False)
    # One object per temperature, so that a caller compiling it keeps one program.
    pure = self._eval_acts.setdefault(
        temperature, functools.partial(self._act_pure, temperature=temperature, update=False))
    return HostPolicy(act_fn, self._acting_trainer.variables['params'],
                      ActingState(key, self._acting.model_state),
                      self.sampling_args(temperature), pure=pure)

  def eval_seed(self, epoch):
    """Reset seed of the evaluation after `epoch`: a pure function of (seed, epoch)."""
    return int(np.random.SeedSequence([self.task.seed, 1, epoch]).generate_state(1)[0])

  @property
  def n_eval_episodes(self):
    return self._n_eval_episodes

  def episode_returns(self, temperature, epoch=None, n_episodes=None, video_path=None):
    """Returns of the evaluation episodes after `epoch` at `temperature`.

    Reset seeds and sampling keys are pure functions of (seed, epoch and the
    temperature's place in eval_temperatures), so evaluating a checkpoint of
    epoch E again reproduces the returns the run logged for epoch E.
    With `video_path` the first episode is also recorded there as an mp4
    (see GymTask.evaluate); the returns are the same.
    """
    epoch = self.epoch if epoch is None else epoch
    n_episodes = n_episodes or self._n_eval_episodes
    temperatures = list(self._eval_temperatures)
    index = temperatures.index(temperature) if temperature in temperatures else len(temperatures)
    _, key = keys.seed_and_folded(self.task.seed, 1_000_003 * epoch + index)
    return self.task.evaluate(self.eval_policy(temperature, key), n_episodes,
                              self.eval_seed(epoch), video_path=video_path)

  def evaluate(self, epoch=None, n_episodes=None):
    """Mean eval return per eval temperature, keyed as in metrics.jsonl."""
    return {metrics_lib.eval_key(t): float(np.mean(self.episode_returns(t, epoch, n_episodes)))
            for t in self._eval_temperatures}

  # -- training -----------------------------------------------------------------------

  # Network name -> the prefix of its learning_rate, gradients_l2 and
  # steps_per_second in the epoch's metrics (none for a network not listed).
  metric_prefixes = {'policy': 'policy_', 'value': 'value_'}

  @property
  def train_state(self):
    """The TrainState: every network's state, the training key, the acting state, extras."""
    return TrainState({name: t.state for name, t in self._trainers.items()}, self.train_key,
                      self._acting, self._extra)

  @train_state.setter
  def train_state(self, state):
    for name, net in state.nets.items():
      self._trainers[name].state = net
    self.train_key = state.train_key
    self._acting = state.acting
    self._extra = dict(state.extra)

  def update(self, state, data):
    """One epoch's training, pure: (state, {network: EpochResult}, {name: scalar}).

    `state` is a TrainState and `data` what `epoch_data` gives (or, on the
    JAX-native backend, the same built from the epoch's rollout). The last
    dict holds metrics that are neither a network's nor the collection's.
    """
    raise NotImplementedError

  def epoch_data(self):
    """The data `update` trains on this epoch, from the task's buffer (device arrays)."""
    raise NotImplementedError

  def fit(self, state, name, data, n_steps, n_chunks=1, n_eval_steps=0, carry=None):
    """One fused epoch of network `name` on `data` inside `update`, pure.

    Returns (state, EpochResult, carry); the batches are drawn with the
    state's training key, which moves on.
    """
    net, key, carry, result = self._trainers[name].epoch(
        state.nets[name], data, state.train_key, carry, n_steps=n_steps, n_chunks=n_chunks,
        n_eval_steps=n_eval_steps)
    return state._replace(nets={**state.nets, name: net}, train_key=key), result, carry

  @staticmethod
  def with_net(state, name, **fields):
    """`state` with network `name`'s state fields replaced (pure)."""
    return state._replace(nets={**state.nets, name: dict(state.nets[name], **fields)})

  def with_acting_statistics(self, state, name):
    """`state` where network `name` holds the normaliser statistics the acting model collected with.

    The epoch's data was normalised by the acting model as its statistics
    stood after collection; a network that normalises the same observations
    must train on exactly those, not on the ones it kept from last epoch.
    A network without a normaliser (no model state) is left as it is.
    """
    if not state.nets[name]['model_state']:
      return state
    return self.with_net(state, name, model_state=state.acting.model_state)

  def epoch_metrics(self, results, extra, start):
    """The host metrics of `update`'s outputs, read back already.

    Raises NonFiniteLossError on a NaN or infinite loss, weight norm or metric.
    """
    metrics = {}
    for name, result in results.items():
      metrics.update(prefix_trainer_metrics(self._trainers[name].results(result, start),
                                            self.metric_prefixes.get(name, '')))
    metrics.update({k: float(v) for k, v in extra.items()})
    return metrics

  # -- JAX-native envs: the whole epoch in one call ------------------------------------

  def rollout_data(self, newest, replay, epoch):
    """`update`'s data on JAX-native envs, as `epoch_data` gives it on the host.

    newest: the SliceData of this epoch's rollout; replay: that of every
    epoch the task keeps (the newest alone without replay); epoch: the
    epoch's number (traced).
    """
    raise NotImplementedError(f'{type(self).__name__} has no JAX-native epoch')

  def jax_epoch(self, state, carry, sample_args, epoch, n_steps):
    """Collect `n_steps` steps of every env and train on them, pure.

    The acting function is the one training collection uses on the host
    (temperature 1, normaliser statistics updated, `sample_args` such as
    epsilon), the rollout becomes the stored-trajectory layout (and joins
    the replay, if the task keeps one) and `update` trains on it, all traced
    into one program.

    Returns (state, carry, results, extra, (episode_returns, ended), n_segments).
    """
    act_fn = functools.partial(self._act_pure, temperature=1.0, update=True)
    acting, carry, rollout = self.task.rollout(
        act_fn, state.nets[self._acting_name]['params'], state.acting, carry, sample_args,
        n_steps)
    carry, newest, replay, n_segments = self.task.epoch_slices(carry, rollout)
    state, results, extra = self.update(state._replace(acting=acting),
                                        self.rollout_data(newest, replay, epoch))
    return state, carry, results, extra, (rollout.episode_return, rollout.ended), n_segments

  def jax_epoch_inputs(self, ahead=0):
    """`jax_epoch`'s per-trainer inputs besides the states for the next epoch
    (or, with `ahead`, for the one that many after it): (sample_args, epoch),
    computed before the epoch counter moves on."""
    return self._epoch_args(self.epoch + 1 + ahead)

  def _epoch_args(self, epoch):
    """(sample_args, epoch) of `jax_epoch` for epoch number `epoch`."""
    return self.sampling_args(1.0, epoch), np.int32(epoch)

  @property
  def jax_epoch_steps(self):
    """Steps per env of a JAX-native epoch (`jax_epoch`'s static n_steps)."""
    return self._n_interactions // self.task.n_envs

  def collect_and_train(self, outputs=None, start=None):
    """One epoch on JAX-native envs: one compiled call, then host bookkeeping.

    outputs: `jax_epoch`'s outputs for this trainer if already computed,
    by a call that began at `start` (perf_counter).
    Returns (collection stats, training metrics) as `collect` and
    `train_epoch` do on the gymnasium backend.
    """
    start = time.perf_counter() if start is None else start
    if outputs is None:
      outputs = self._epoch_outputs()  # which moves the trainer to the epoch's state
    else:
      self.train_state, self.task.carry = outputs[0], outputs[1]
    _, _, results, extra, (returns, ended), n_segments = outputs
    results, extra, returns, ended, n_segments = jax.device_get(
        (results, extra, returns, ended, n_segments))
    # Episodes in the order they ended (step-major, then env), as on the host.
    episode_returns = [float(r) for r in returns[ended]]
    self.task.record_epoch(self._n_interactions, n_segments, episode_returns)
    stats = {'episode_returns': episode_returns, 'env_steps': self._n_interactions,
             'n_trajectories': int(n_segments)}
    return stats, self.epoch_metrics(results, extra, start)

  def _dispatch_epoch(self, epoch):
    """Starts `jax_epoch` of `epoch` from the current state; returns its (future) outputs."""
    if not hasattr(self, '_jax_epoch'):
      self._jax_epoch = compiler.jit(self.jax_epoch, static_argnames='n_steps')
    return self._jax_epoch(self.train_state, self.task.carry, *self._epoch_args(epoch),
                           n_steps=self.jax_epoch_steps)

  def _epoch_inputs(self):
    """The arrays the next `jax_epoch` call would start from (its inputs' identity)."""
    return jax.tree_util.tree_leaves((self.train_state, self.task.carry))

  def _epoch_outputs(self):
    """This epoch's `jax_epoch` outputs, with the next epoch already dispatched.

    JAX runs a compiled call asynchronously, so the next epoch (a pure
    function of this one's outputs and the epoch number) can start on the
    device while the host reads this one's metrics, evaluates, logs and
    checkpoints, instead of the two taking turns. The next epoch's outputs
    are used only if the state it started from is still the trainer's (the
    same arrays: nothing restored or replaced it since); otherwise, and
    after the last epoch, they are dropped. Either way the numbers are
    those of calling the epochs one by one.
    """
    ahead, self._ahead = self._ahead, None
    if (ahead is not None and ahead.epoch == self.epoch
        and _same_arrays(ahead.inputs, self._epoch_inputs())):
      outputs = ahead.outputs
    else:
      outputs = self._dispatch_epoch(self.epoch)  # run_epoch has counted this epoch already
    # The trainer moves to this epoch's state before the next call starts, so
    # the previous epoch's arrays are freed rather than held alongside two others.
    self.train_state, self.task.carry = outputs[0], outputs[1]
    if self._last_epoch is not None and self.epoch < self._last_epoch:
      self._ahead = _Ahead(self.epoch + 1, self._epoch_inputs(),
                           self._dispatch_epoch(self.epoch + 1))
    return outputs

  # -- the epoch loop ----------------------------------------------------------------

  def _update_then_metrics(self, state, data):
    """`update` as (the new state, what the host reads: (results, extra))."""
    state, results, extra = self.update(state, data)
    return state, (results, extra)

  def train_epoch(self):
    """One epoch of training on the collected data, in one compiled call; returns its metrics."""
    start = time.perf_counter()
    state, (results, extra) = self._update(self.train_state, self.epoch_data())
    self.train_state = state
    return self.epoch_metrics(results, extra, start)

  def run_epoch(self, outputs=None, started=None):
    """Collect, train, evaluate: one epoch. Returns its metrics record.

    outputs, started: on JAX-native envs, this trainer's outputs of
    `jax_epoch` when the caller has already run it (rl.seeds runs many
    seeds' at once), and the perf_counter time that call began.
    """
    self.epoch += 1
    start = time.perf_counter() if started is None else started
    if self.task.jax_native:
      # Collection and training are one compiled call, timed as training.
      collected = start
      stats, train_metrics = self.collect_and_train(outputs, start)
    else:
      stats = self.collect(n_trajectories=self._n_trajectories,
                           n_interactions=self._n_interactions, epoch_id=self.epoch,
                           only_eval=self._only_eval)
      collected = time.perf_counter()
      train_metrics = {} if self._only_eval else self.train_epoch()
    trained = time.perf_counter()
    due = self.epoch % self._eval_every == 0 or self.epoch == self._last_epoch
    eval_metrics = self.evaluate() if self._n_eval_episodes and due else {}
    evaluated = time.perf_counter()
    returns = stats['episode_returns']
    record = {
        'epoch': self.epoch,
        'env_steps': self.task.n_interactions,
        'n_trajectories': self.task.n_trajectories,
        'train_return': float(np.mean(returns)) if returns else float('nan'),
        **eval_metrics,
        **train_metrics,
        'time_collect': collected - start,
        'time_train': trained - collected,
        'time_eval': evaluated - trained,
        'env_steps_per_second': stats['env_steps'] / max((collected - start) or
                                                         (trained - start), 1e-9),
    }
    return record

  def run(self, n_epochs, checkpoint_fn=None, checkpoint_every=10, writer=None, log=None,
          stop_at_return=None):
    """Runs epochs until `self.epoch == n_epochs` (or the eval return reaches a goal).

    Args:
      n_epochs: the total number of epochs (not the number still to run).
      checkpoint_fn: called after an epoch that should be checkpointed.
      checkpoint_every: checkpoint every this many epochs, and after the last.
      writer: a MetricsWriter for each epoch's record.
      log: a function taking the console line.
      stop_at_return: stop (after checkpointing) once the greedy eval return
        reaches this; a run that already reached it does nothing more.
    """
    loop = EpochLoop(self, n_epochs, checkpoint_fn, checkpoint_every, writer, log,
                     stop_at_return)
    while not loop.done:
      epoch_start = time.perf_counter()
      loop.finish(self.run_epoch(), epoch_start)

  # -- checkpoints --------------------------------------------------------------------

  def state_dict(self):
    """(arrays, meta) holding everything needed to continue bit for bit."""
    task_arrays, task_meta = self.task.state_dict()
    arrays = {
        'task': task_arrays,
        'trainers': {name: t.state_dict() for name, t in self._trainers.items()},
        'collect': {'key': keys.to_data(self._acting.key), 'model_state': self._acting.model_state},
        'train_key': keys.to_data(self.train_key),
        'extra': self._extra,
    }
    meta = {'epoch': self.epoch, 'history': self.history, 'task': task_meta}
    return arrays, meta

  def load_state_dict(self, arrays, meta):
    self.task.load_state_dict(arrays['task'], meta['task'])
    for name, trainer in self._trainers.items():
      trainer.load_state_dict(arrays['trainers'][name])
    model_state = jax.tree_util.tree_map(
        lambda t, r: jnp.asarray(r, dtype=t.dtype), self._acting.model_state,
        dict(arrays['collect'].get('model_state', {})))
    self._acting = ActingState(keys.from_data(arrays['collect']['key'], 'collection key'), model_state)
    self.train_key = keys.from_data(arrays['train_key'], 'training key')
    self._extra = jax.tree_util.tree_map(lambda t, r: jnp.asarray(r, dtype=t.dtype),
                                         self._extra, dict(arrays.get('extra', {})))
    self.epoch = int(meta['epoch'])
    self.history = list(meta['history'])

  def close(self):
    self.task.close()


class EpochLoop:
  """What RLTrainer.run does around each epoch: history, metrics, console, checkpoints, stop.

  Apart from the epochs themselves, so that several trainers whose epochs
  run together (rl.seeds: many seeds in one compiled call) each keep their
  own bookkeeping. `done` says whether the trainer should run another epoch.
  """

  def __init__(self, trainer, n_epochs, checkpoint_fn=None, checkpoint_every=10, writer=None,
               log=None, stop_at_return=None):
    self.trainer = trainer
    self.n_epochs = n_epochs
    self._checkpoint_fn = checkpoint_fn
    self._checkpoint_every = checkpoint_every
    self._writer = writer
    self._log = log
    self._stop_at_return = stop_at_return
    # The first epoch this process runs compiles the jitted steps.
    self._first_epoch = self._timed_from = None
    trainer._last_epoch = n_epochs  # pylint: disable=protected-access
    history = trainer.history
    self.done = trainer.epoch >= n_epochs or bool(history and self._reached(history[-1]))

  def _reached(self, record):
    value = record.get('eval_return')
    return (self._stop_at_return is not None and value is not None
            and value >= self._stop_at_return)

  def finish(self, record, epoch_start):
    """Books the epoch that began at `epoch_start` (perf_counter) and produced `record`."""
    trainer = self.trainer
    if self._first_epoch is None:
      # Compiling makes the first epoch many times longer than the next: its
      # seconds are logged apart and the time left is estimated without it.
      self._first_epoch, self._timed_from = trainer.epoch, time.perf_counter()
      record['time_compile'] = self._timed_from - epoch_start
      per_epoch = None
    else:
      per_epoch = (time.perf_counter() - self._timed_from) / (trainer.epoch - self._first_epoch)
    trainer.history.append(metrics_lib.clean(record))
    if self._writer is not None:
      self._writer.write(record)
    if self._log is not None:
      self._log(metrics_lib.console_line(record, self.n_epochs, per_epoch))
    reached = self._reached(record)
    if self._checkpoint_fn is not None and (trainer.epoch % self._checkpoint_every == 0
                                            or trainer.epoch == self.n_epochs or reached):
      self._checkpoint_fn()
    if reached and self._log is not None:
      self._log(f'Stopping: eval return {record["eval_return"]:.1f} reached '
                f'train_rl.stop_at_return = {self._stop_at_return}.')
    self.done = reached or trainer.epoch >= self.n_epochs
