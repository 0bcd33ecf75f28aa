"""Learner: one trainer's epochs, on either env backend, driven by its algorithm.

One epoch: collect (temperature 1, normaliser statistics updated), train,
evaluate (greedy and at other temperatures, on separate envs) and report the
epoch's record. Evaluation comes after training, so the last logged eval is
the policy in the last checkpoint.

The algorithm (rl.learner.algorithm.Algorithm) says which networks it trains,
how it acts, what data an epoch trains on and how (`update`, a pure function
of the TrainState). On gymnasium envs the host collects and then calls
`update` in one compiled call; on JAX-native envs `jax_epoch` traces the
collection and `update` into one program, run several epochs to a call, and
the next call is dispatched while the host books the current one
(rl.learner.look_ahead).
"""
import functools
import time

import jax
import jax.numpy as jnp
import numpy as np

from rl import compiler
from rl import keys
from rl import metrics as metrics_lib
from rl.envs.task import TaskNeeds
from rl.learner import history as history_lib
from rl.learner import look_ahead
from rl.learner.acting import ActingState
from rl.learner.acting import Actor
from rl.learner.acting import HostPolicy
from rl.learner.acting import initial_acting_state
from rl.learner.fused_epoch import epoch_result
from rl.learner.network_trainer import initialize_together
from rl.learner.state import TrainState
from rl.learner.state import with_acting_statistics

# Metrics every network reports; a trainer with several networks prefixes
# them with the network's name so they don't collide.
NETWORK_METRICS = ('learning_rate', 'gradients_l2', 'steps_per_second')

# The largest replay reserved up front (rows). Padding costs every epoch what
# the reserved size costs, so a larger replay grows with its contents instead.
MAX_RESERVED_ROWS = 2**17


def prefix_network_metrics(metrics, prefix):
  """`metrics` with learning_rate etc. renamed prefix + name (e.g. value_learning_rate)."""
  return {(prefix + k if k in NETWORK_METRICS else k): v for k, v in metrics.items()}


class Learner:
  """Collects with the task, trains the algorithm's networks, evaluates, epoch by epoch.

  Args:
    task: the RLTask.
    algorithm: the trainer (rl.learner.algorithm.Algorithm).
    options: its rl.learner.trainer.LoopOptions.
  """

  def __init__(self, task, algorithm, options):
    self.task = task
    self.algorithm = algorithm
    self.options = options
    self.epoch = 0
    self._state_epoch = 0  # the epoch of train_state (state_is_current)
    self.history = []
    self._history_bytes = history_lib.HistoryBytes()
    self.last_epoch = None  # set by the epoch loop: the last epoch is always evaluated
    # Whether booking epoch number e reads the learner's state (a JAX-native
    # call of several epochs ends there); the epoch loop adds its checkpoints.
    self.reads_state = lambda e: self.evaluates(e) or e >= self.last_epoch
    # What the epoch in progress does (the first epoch's progress lines).
    self.phase = 'compiling'
    # False when the caller evaluates this learner with others of its batch
    # (rl.seeds) and hands run_epoch the results.
    self.evaluates_alone = True
    # The first JAX-native epoch of the process compiles the evaluation too.
    self._evaluation_compiled = False
    # The collection key is the seed's; the training key draws the training
    # batches (and any sampling inside the losses' inputs).
    seed_key, self.train_key = keys.seed_and_folded(task.seed, 2)
    self.networks, acting = algorithm.build_networks()
    self.acting_name = acting.network
    self.actor = Actor(self.networks[acting.network], acting)
    initialize_together(list(self.networks.values()))
    self.acting = initial_acting_state(seed_key, self.networks[acting.network])
    self.extra = algorithm.initial_extra(self.networks)
    task.build_storage(self.task_needs(acting))
    # One compiled call trains every network of an epoch.
    self._update = compiler.jit(self._train)
    self.look_ahead = look_ahead.LookAhead(look_ahead.One(self))

  def task_needs(self, acting):
    """What the task's storage must hold: the algorithm's replay, its acting outputs' width,
    and the rows (gymnasium) or steps per env (JAX-native) of an epoch."""
    n_replay, n_interactions = self.algorithm.n_replay_epochs, self.options.n_interactions
    reserved = 0
    if n_interactions is not None and 1 < n_replay and n_replay * n_interactions <= MAX_RESERVED_ROWS:
      # Reserved from the start, the training epoch compiles once for the
      # replay's final size rather than at every capacity bucket it passes.
      reserved = n_replay * n_interactions
    steps = self.jax_epoch_steps if self.task.jax_native else None
    return TaskNeeds(n_replay, acting.dist.n_inputs, reserved, steps)

  # -- state ------------------------------------------------------------------------

  @property
  def train_state(self):
    """The TrainState: every network's state, the training key, the acting state, extras."""
    return TrainState({name: n.state for name, n in self.networks.items()}, self.train_key,
                      self.acting, self.extra)

  @train_state.setter
  def train_state(self, state):
    for name, net in state.nets.items():
      self.networks[name].state = net
    self.train_key = state.train_key
    self.acting = state.acting
    self.extra = dict(state.extra)

  def state_dict(self):
    """(arrays, meta) holding everything needed to continue bit for bit."""
    task_arrays, task_meta = self.task.state_dict()
    arrays = {
        'task': task_arrays,
        'trainers': {name: n.state_dict() for name, n in self.networks.items()},
        'collect': {'key': keys.to_data(self.acting.key), 'model_state': self.acting.model_state},
        'train_key': keys.to_data(self.train_key),
        'extra': self.extra,
        'history': self._history_bytes(self.history),
    }
    meta = {'epoch': self.epoch, 'task': task_meta}
    return arrays, meta

  def load_state_dict(self, arrays, meta):
    self.task.load_state_dict(arrays['task'], meta['task'])
    for name, network in self.networks.items():
      network.load_state_dict(arrays['trainers'][name])

    def like(template, restored):
      return jax.tree_util.tree_map(lambda t, r: jnp.asarray(r, dtype=t.dtype), template,
                                    dict(restored))
    self.acting = ActingState(keys.from_data(arrays['collect']['key'], 'collection key'),
                              like(self.acting.model_state,
                                   arrays['collect'].get('model_state', {})))
    self.train_key = keys.from_data(arrays['train_key'], 'training key')
    self.extra = like(self.extra, arrays.get('extra', {}))
    self.epoch = self._state_epoch = int(meta['epoch'])
    # A checkpoint may also hold the history in its JSON, as a list.
    self.history = (history_lib.decode(arrays['history']) if 'history' in arrays
                    else list(meta['history']))

  @property
  def state_is_current(self):
    """Whether train_state is of the latest epoch booked, what a checkpoint saves: a JAX-native
    epoch booked from the middle of a call (rl.learner.look_ahead) leaves it at an earlier one."""
    return not self.task.jax_native or self._state_epoch == self.epoch

  def share_programs(self, other):
    """Acts and evaluates with `other`'s compiled functions (a learner of the same config
    and another seed), so nothing compiles twice."""
    self.actor.share_programs(other.actor)
    self.task.share_programs(other.task)

  def close(self):
    self.task.close()

  # -- acting -----------------------------------------------------------------------

  @property
  def acting_params(self):
    return self.networks[self.acting_name].variables['params']

  def collect_initial(self):
    """Collects the task's random initial trajectories (epoch 0), if it has any."""
    if self.task.jax_native:
      return
    policy = self.actor.random_policy(self.task, self.acting)
    self.task.collect_initial(policy)
    if isinstance(policy, HostPolicy):
      self.acting = policy.state

  def collect(self, n_trajectories=None, n_interactions=None, epoch_id=None):
    """Collects with the training policy into epoch `epoch_id` (default: the current one).

    The amount is the options' unless given. Returns the task's collection stats.
    """
    policy = self.actor.collect_policy(self.acting_params, self.acting,
                                       self.algorithm.sampling_args(1.0, self.epoch))
    options = self.options
    if n_trajectories is None and n_interactions is None:
      n_trajectories, n_interactions = options.n_trajectories, options.n_interactions
    stats = self.task.collect(policy, n_trajectories=n_trajectories,
                              n_interactions=n_interactions,
                              epoch_id=max(self.epoch, 1) if epoch_id is None else epoch_id,
                              only_eval=options.only_eval)
    self.acting = policy.state
    return stats

  def eval_seed(self, epoch):
    """Reset seed of the evaluation after `epoch`: a pure function of (seed, epoch)."""
    return int(np.random.SeedSequence([self.task.seed, 1, epoch]).generate_state(1)[0])

  def episode_returns(self, temperature, epoch=None, n_episodes=None, video_path=None):
    """Returns of the evaluation episodes after `epoch` at `temperature`.

    Reset seeds and sampling keys are pure functions of (seed, epoch and the
    temperature's place in eval_temperatures), so evaluating a checkpoint of
    epoch E again reproduces the returns the run logged for epoch E. With
    `video_path` the first episode is also recorded there as an mp4.
    """
    return self.task.evaluate(*self._eval_inputs(temperature, epoch, n_episodes),
                              video_path=video_path)

  def _eval_inputs(self, temperature, epoch, n_episodes, state=None):
    """(policy, episodes, reset seed) of the evaluation after `epoch` (None: the current)
    with `state`'s policy (a TrainState; None: the learner's)."""
    epoch = self.epoch if epoch is None else epoch
    return (self.eval_policy(temperature, self.eval_key(temperature, epoch), epoch, state),
            n_episodes or self.options.n_eval_episodes, self.eval_seed(epoch))

  def eval_key(self, temperature, epoch):
    """The sampling key of the evaluation after `epoch` at `temperature`: a pure function of
    (seed, epoch, the temperature's place in eval_temperatures)."""
    return keys.seed_and_folded(*self.eval_key_words(temperature, epoch))[1]

  def eval_key_words(self, temperature, epoch):
    """(seed, data) whose folded key is `eval_key(temperature, epoch)`."""
    temperatures = list(self.options.eval_temperatures)
    index = temperatures.index(temperature) if temperature in temperatures else len(temperatures)
    return self.task.seed, 1_000_003 * epoch + index

  def eval_policy(self, temperature, key, epoch=None, state=None):
    """A policy at `temperature` with its own key stream; normaliser statistics frozen.
    state: the TrainState whose policy plays (None: the learner's); epoch: its epoch."""
    state = self.train_state if state is None else state
    epoch = self.epoch if epoch is None else epoch
    return self.actor.eval_policy(state.nets[self.acting_name]['params'],
                                  ActingState(key, state.acting.model_state), temperature,
                                  self.algorithm.sampling_args(temperature, epoch))

  def evaluates(self, epoch):
    """Whether epoch number `epoch` ends with an evaluation (every eval_every, and the last)."""
    options = self.options
    return bool(options.n_eval_episodes) and (epoch % options.eval_every == 0
                                              or epoch == self.last_epoch)

  def compile_evaluation(self):
    """Compiles the evaluation programs of a JAX-native task without playing them.

    Called in the process's first epoch, so that `time_compile` holds every
    program the run compiles and the first evaluation's time is playing only.
    """
    if not (self.task.jax_native and self.options.n_eval_episodes and self.evaluates_alone):
      return
    self.phase = 'compiling the evaluation'
    for temperature in self.options.eval_temperatures:
      _, key = keys.seed_and_folded(self.task.seed, 0)
      self.task.compile_evaluation(self.eval_policy(temperature, key),
                                   self.options.n_eval_episodes)

  def evaluate(self, epoch=None, n_episodes=None):
    """Mean eval return per eval temperature, keyed as in metrics.jsonl."""
    returns = {t: self.episode_returns(t, epoch, n_episodes)
               for t in self.options.eval_temperatures}
    return metrics_lib.eval_metrics(returns)

  def play_evaluation(self, state, epoch):
    """On JAX-native envs, dispatches the evaluation after `epoch` of the TrainState `state`
    (futures allowed): {temperature: its returns, a device array not waited for}."""
    return {t: self.task.play(*self._eval_inputs(t, epoch, None, state))
            for t in self.options.eval_temperatures}

  # -- training ---------------------------------------------------------------------

  def _train(self, state, data):
    """The algorithm's update on networks that hold the acting statistics, and each network's
    EpochResult: (state, {network: EpochResult}, extra); pure."""
    state, records, extra = self.algorithm.update(with_acting_statistics(state), data)
    return state, {name: epoch_result(record, state.nets[name], self.networks[name].lr_schedule)
                   for name, record in records.items()}, extra

  def epoch_metrics(self, results, extra, seconds):
    """The host metrics of `update`'s outputs, read back already, of an epoch that trained
    for `seconds`.

    Raises NonFiniteLossError on a NaN or infinite loss, weight norm or metric.
    """
    metrics = {}
    prefixes = self.algorithm.metric_prefixes
    for name, result in results.items():
      metrics.update(prefix_network_metrics(self.networks[name].results(result, seconds),
                                            prefixes.get(name, '')))
    metrics.update({k: float(v) for k, v in extra.items()})
    return metrics

  def train_epoch(self):
    """One epoch of training on the collected data, in one compiled call; returns its metrics."""
    start = time.perf_counter()
    state, results, extra = self._update(self.train_state, self.algorithm.epoch_data(self.epoch))
    results, extra = jax.device_get((results, extra))
    self.train_state = state
    return self.epoch_metrics(results, extra, time.perf_counter() - start)

  def jax_epoch(self, state, carry, sample_args, epoch, n_steps):
    """Collect `n_steps` steps of every JAX-native env and train on them, pure.

    The acting function is the one training collection uses on the host; the
    rollout becomes the stored-trajectory layout (and joins the replay, if the
    task keeps one) and `update` trains on it, all traced into one program.

    Returns (state, carry, results, extra, (episode_returns, ended), n_segments).
    """
    act_fn = functools.partial(self.actor.pure, temperature=1.0, update=True)
    acting, carry, rollout = self.task.rollout(
        act_fn, self.actor.dist.noise, state.nets[self.acting_name]['params'], state.acting,
        carry, sample_args, n_steps)
    carry, newest, replay, n_segments = self.task.epoch_slices(carry, rollout)
    state, results, extra = self._train(
        state._replace(acting=acting), self.algorithm.rollout_data(newest, replay, epoch))
    return state, carry, results, extra, (rollout.episode_return, rollout.ended), n_segments

  def epoch_args(self, epoch):
    """(sample_args, epoch) of `jax_epoch` for epoch number `epoch`."""
    return self.algorithm.sampling_args(1.0, epoch), np.int32(epoch)

  @property
  def jax_epoch_steps(self):
    """Steps per env of a JAX-native epoch (`jax_epoch`'s static n_steps)."""
    return self.options.n_interactions // self.task.n_envs

  def collect_and_train(self, outputs, seconds):
    """Books one JAX-native epoch from `jax_epoch`'s outputs, read back already.

    outputs: (state, carry, results, extra, (episode_returns, ended),
    n_segments); state and carry are None for an epoch whose booking does not
    read them (rl.learner.look_ahead, rl.seeds). seconds: the epoch's time.
    Returns (collection stats, training metrics) as `collect` and
    `train_epoch` do on the host.
    """
    if outputs[0] is not None:
      self.train_state, self.task.carry = outputs[0], outputs[1]
      self._state_epoch = self.epoch
    _, _, results, extra, (returns, ended), n_segments = outputs
    # Episodes in the order they ended (step-major, then env), as on the host.
    episode_returns = [float(r) for r in np.asarray(returns)[np.asarray(ended)]]
    n_steps = self.options.n_interactions
    self.task.record_epoch(n_steps, n_segments, episode_returns)
    stats = {'episode_returns': episode_returns, 'env_steps': n_steps,
             'n_trajectories': int(n_segments)}
    return stats, self.epoch_metrics(results, extra, seconds)

  def run_epoch(self, outputs=None, seconds=None, evaluation=None):
    """Collect, train, evaluate: one epoch. Returns its metrics record.

    On JAX-native envs, a caller that runs many seeds' epochs at once
    (rl.seeds) hands over this learner's: outputs, this epoch's `jax_epoch`
    outputs read back (its state None unless the booking reads it); seconds,
    the epoch's time; evaluation, (eval metrics, this seed's share of their
    seconds) when it played this epoch's evaluation with the other seeds'.
    """
    start = time.perf_counter()
    eval_metrics, eval_seconds = {}, 0.0
    if self.task.jax_native:
      # Collection and training are one compiled call, timed as training.
      self.phase = 'collecting and training (one program)'
      if not self._evaluation_compiled:
        self.compile_evaluation()  # the process's first epoch compiles every program
        self._evaluation_compiled = True
      if outputs is None:
        outputs, seconds, evaluation = self.look_ahead.take(start)
      self.epoch += 1
      stats, train_metrics = self.collect_and_train(outputs, seconds)
      collect_seconds, train_seconds = 0.0, seconds
      if evaluation is not None:
        eval_metrics, eval_seconds = evaluation
      elif self.evaluates(self.epoch):  # a caller's epoch, evaluated alone
        self.phase = 'evaluating'
        evaluated = time.perf_counter()
        eval_metrics = self.evaluate()
        eval_seconds = time.perf_counter() - evaluated
    else:
      self.epoch += 1
      self.phase = 'collecting'
      stats = self.collect(epoch_id=self.epoch)
      collected = time.perf_counter()
      self.phase = 'training'
      train_metrics = {} if self.options.only_eval else self.train_epoch()
      trained = time.perf_counter()
      if self.evaluates(self.epoch):
        self.phase = 'evaluating'
        eval_metrics = self.evaluate()
      collect_seconds, train_seconds = collected - start, trained - collected
      eval_seconds = time.perf_counter() - trained
    returns = stats['episode_returns']
    return {
        'epoch': self.epoch,
        'env_steps': self.task.n_interactions,
        'n_trajectories': self.task.n_trajectories,
        'train_return': float(np.mean(returns)) if returns else float('nan'),
        **eval_metrics,
        **train_metrics,
        'time_collect': collect_seconds,
        'time_train': train_seconds,
        'time_eval': eval_seconds,
        'env_steps_per_second': stats['env_steps'] / max(collect_seconds or train_seconds, 1e-9),
    }
