"""Many seeds of one config in one process: their epochs vmapped into one compiled call.

`python -m rl.run --config_file=X --seeds=0-7` builds one ordinary run per
seed (its own folder, checkpoints, metrics and log; rl.experiment.prepared_run). On
JAX-native envs every seed's whole epoch (collection, advantages, gradient
steps) is the same pure function of that seed's state (RLTrainer.jax_epoch),
so `train_together` stacks the seeds' states and runs that function under
`jax.vmap`: one call for all of them, several epochs to a call and
dispatched ahead by a lone run's driver (rl.learner.look_ahead.LookAhead,
with `Seeds` for the batch's side), and likewise one call per evaluation
(`play_together`). Each seed then books its epoch as a lone
run would (metrics, checkpoints, the stop at a target return), which is why
each seed's folder resumes and reads like any other run's. A seed that stops
early (its target reached) rides along in the batch, its results dropped,
until the others are done: the batch keeps its shape and so its compiled
program. The members of a grid (`--grid`, rl.members) train the same way,
their float hyperparameters one more vmapped input of the program
(rl.traced_values).
"""
import os
import time
from typing import NamedTuple

import jax
import numpy as np

from rl import compiler
from rl import keys
from rl import metrics as metrics_lib
from rl import termination
from rl import traced_values
from rl.envs.task import MAX_SEED
from rl.errors import ConfigError
from rl.errors import Interrupted
from rl.errors import one_line_errors
from rl.learner import look_ahead
from rl.learner import loop as loop_lib
from rl.learner.state import ActingState

# The most seeds one --seeds run takes. On JAX-native envs they all train in
# one batch, their states side by side in device memory; on gymnasium envs
# they run one after the other in one process. Far more than this is a typo
# (0-100000) rather than an experiment; a sweep (launch.sweep) spreads more.
MAX_SEEDS = 1024


# Calls dispatched beyond the one being booked. A checkpoint of 8 seeds
# takes the host longer than a call's device time (docs/performance.md); the
# device works through the queued calls meanwhile.
CALLS_AHEAD = 2


def parse_seeds(text):
  """'0-7' -> [0, ..., 7]; '0,3,5' -> [0, 3, 5]; ranges and lists mix ('0-2,9')."""
  seeds = []
  for part in str(text).split(','):
    part = part.strip()
    descending = False
    try:
      if '-' in part[1:]:
        first, last = part.split('-', 1) if not part.startswith('-') else (part, None)
        first, last = int(first), int(last)
        descending = last < first
        if descending:
          raise ValueError
        _check_count(text, len(seeds) + last - first + 1)
        seeds.extend(range(first, last + 1))
      else:
        seeds.append(int(part))
        _check_count(text, len(seeds))
    except ConfigError:
      raise
    except (TypeError, ValueError):
      if descending:
        raise ConfigError(f'--seeds={text!r}: the range {part} is descending; write it '
                          f'{last}-{first}.') from None
      raise ConfigError(f"--seeds={text!r}: give seeds as a range '0-7', a list '0,3,5' "
                        'or both (0-2,9).') from None
  if len(set(seeds)) != len(seeds) or any(s < 0 for s in seeds):
    raise ConfigError(f'--seeds={text!r} repeats a seed or has a negative one; each seed once.')
  if max(seeds) > MAX_SEED:
    raise ConfigError(f'--seeds={text!r} has seed {max(seeds)}; seeds go from 0 to {MAX_SEED} '
                      '(2**31 - 1).')
  return seeds


def _check_count(text, count):
  if count > MAX_SEEDS:
    raise ConfigError(f'--seeds={text} asks for {count:,} seeds; one --seeds run takes at most '
                      f'{MAX_SEEDS:,}: give fewer, or spread them over several runs.')


def interrupted_message(parent, stops):
  """Where a Ctrl-C stopped each seed of a --seeds run ({folder name: stopped_at()}), in one line."""
  def stop(epoch, n_epochs, checkpoint):
    if checkpoint is not None and checkpoint == epoch - 1:
      return f'after epoch {checkpoint}/{n_epochs} (checkpointed)'
    last = 'none' if checkpoint is None else f'epoch {checkpoint}'
    return f'in epoch {epoch}/{n_epochs} (last checkpoint: {last})'
  where = '; '.join(f'{name} {stop(*at)}' for name, at in stops.items())
  return (f'interrupted: {where}, under {parent}: rerun the same command to resume each seed '
          'from its last checkpoint (a seed without one starts again).')


def _stack(trees):
  return jax.tree_util.tree_map(lambda *leaves: jax.numpy.stack(leaves), *trees)


def _stack_host(trees):
  # On the host: a device stack would be one more computation per leaf in
  # the queue behind the batch's epochs (keys.folded_keys).
  return jax.tree_util.tree_map(lambda *leaves: np.stack(leaves), *trees)


def _read_states(states):
  """The batch's stacked states read back to numpy, typed keys as their raw words.

  Slicing a seed's part out of a device array would be a computation, which
  waits behind the calls queued on the device; numpy slices cost nothing.
  """
  return jax.device_get(jax.tree_util.tree_map(
      lambda x: _RawKeys(jax.random.key_data(x)) if keys.is_key(x) else x, states))


class _RawKeys(NamedTuple):
  """A stacked key array's raw words (a pytree node, so read back with the rest)."""
  words: np.ndarray


def _seed_states(states, i):
  """Seed i's part of `_read_states`' states: numpy arrays, and keys made from their words
  (on the host, no computation)."""
  return jax.tree_util.tree_map(
      lambda x: keys.wrap_words(x.words[i]) if isinstance(x, _RawKeys) else x[i], states,
      is_leaf=lambda x: isinstance(x, _RawKeys))


def _evaluation_inputs(trainers, state, temperature, ahead):
  """(acting function, params, acting states, reset seeds, sample_args) of every seed's
  evaluation after its epoch `ahead` epochs from now at `temperature`, stacked along the seeds;
  `state` is the batch's stacked TrainState."""
  lead = trainers[0]
  epochs = [t.epoch + ahead for t in trainers]
  seeds, data = zip(*[t.eval_key_words(temperature, e) for t, e in zip(trainers, epochs)])
  acting = ActingState(keys.folded_keys(seeds, data), state.acting.model_state)
  sample_args = _stack_host([t.algorithm.sampling_args(temperature, e)
                             for t, e in zip(trainers, epochs)])
  return (lead.actor.eval_pure(temperature), state.nets[lead.acting_name]['params'], acting,
          [t.eval_seed(e) for t, e in zip(trainers, epochs)], sample_args)


def compile_evaluation(trainers, state):
  """Compiles the batch's evaluation programs (one per temperature) without playing them."""
  lead = trainers[0]
  for temperature in lead.options.eval_temperatures:
    pure, params, acting, _, sample_args = _evaluation_inputs(trainers, state, temperature, 1)
    lead.task.compile_evaluation_seeds(pure, params, acting, sample_args,
                                       lead.options.n_eval_episodes)


def play_together(trainers, state, ahead):
  """Dispatches the evaluation after every seed's epoch `ahead` epochs from now, for every seed
  of the batch in one vmapped call per temperature: {temperature: returns [seeds, episodes],
  a device array not waited for}.

  A seed's returns are those it plays alone: the same parameters, keys and
  reset seeds, in a vmapped copy of the same loop.
  """
  lead = trainers[0]
  played = {}
  for temperature in lead.options.eval_temperatures:
    pure, params, acting, reset_seeds, sample_args = _evaluation_inputs(trainers, state,
                                                                        temperature, ahead)
    played[temperature] = lead.task.play_seeds(pure, params, acting, reset_seeds, sample_args,
                                               lead.options.n_eval_episodes)
  return played


def read_together(returns, which, seconds):
  """{i: (eval metrics, seed i's share of the evaluation's `seconds`)} of the seeds `which`
  (indices) from `play_together`'s returns read back, what Learner.run_epoch takes as
  `evaluation`."""
  return {i: (metrics_lib.eval_metrics({t: r[i] for t, r in returns.items()}),
              seconds / len(which)) for i in which}


class Seeds:
  """A batch's side of rl.learner.look_ahead.LookAhead: the epochs' program vmapped over the
  seeds, their states stacked on the device from one call to the next, the evaluation
  played together (`together`: several seeds that evaluate), and each seed's state read
  back only for an epoch whose booking reads it.

  values: a grid's {binding name: [each member's value]} (rl.grid), inputs of
  the program traced where the epoch reads them (rl.traced_values); None or
  {} for seeds of one config.
  """

  def __init__(self, learners, together, values=None):
    lead = learners[0]
    self.learners = learners
    self.together = together
    run = look_ahead.epochs_program(lead.jax_epoch, lead.jax_epoch_steps)
    if values:
      lead_values = {name: v[0] for name, v in values.items()}

      def run_traced(state, carry, sample_args, epochs, n, traced):
        with traced_values.tracing(traced, lead_values):
          return run(state, carry, sample_args, epochs, n)
      program = compiler.jit(jax.vmap(run_traced, in_axes=(0, 0, 0, 0, None, 0)))
      stacked = {name: np.asarray(v, np.float32) for name, v in values.items()}
      self.program = lambda *args: program(*args, stacked)
    else:
      self.program = compiler.jit(jax.vmap(run, in_axes=(0, 0, 0, 0, None)))
    self._stacked = None
    self._states = None  # (Read, the batch's states read back at its last epoch)

  def start(self, after):
    """The stacked (state, carry) of the call after the Read `after` (None: the seeds')."""
    if after is not None:
      return after.call.outputs[:2]
    if self._stacked is None:
      self._stacked = (_stack([t.train_state for t in self.learners]),
                       _stack([t.task.carry for t in self.learners]))
    return self._stacked

  def unchanged(self, inputs):
    del inputs
    return True  # the batch's state is its own: nothing replaces it between calls

  def stack_host(self, rows):
    return _stack_host(rows)

  def play(self, state, evaluating, ahead):
    return play_together(self.learners, state, ahead) if self.together else None

  def read_evaluation(self, returns, evaluating, seconds):
    return read_together(returns, evaluating, seconds)

  def epoch_outputs(self, read, i, j, evaluation):
    """Seed i's jax_epoch outputs of the call's epoch j; its state (read back once for all
    seeds) only at the call's last epoch, when its booking reads it."""
    learner, state = self.learners[i], (None, None)
    if j == read.call.n - 1 and learner.reads_state(learner.epoch + 1, evaluation):
      if self._states is None or self._states[0] is not read:
        self._states = (read, _read_states(read.call.outputs[:2]))
      state = _seed_states(self._states[1], i)
    return state + jax.tree_util.tree_map(lambda x: x[i][j], read.host)


def train_together(runs, values=None):
  """Trains PreparedRuns (rl.experiment) of one config and different seeds, vmapped (module
  doc); values: a grid's {binding name: [each run's value]} (Seeds)."""
  trainers = [r.learner for r in runs]
  lead = trainers[0]
  # The seeds share one acting function and one evaluation program: their
  # configs are the same, only their parameters and keys differ.
  for trainer in trainers[1:]:
    trainer.share_programs(lead)
  # The seeds evaluate together, one vmapped program (play_together).
  together = len(trainers) > 1 and bool(lead.options.n_eval_episodes)
  for trainer in trainers:
    trainer.evaluates_alone = not together
  batch = Seeds(trainers, together, values)
  ahead = look_ahead.LookAhead(batch, calls_ahead=CALLS_AHEAD)
  loops = [r.epoch_loop() for r in runs]
  current_run = runs[0]

  # The folder that holds every run of the job (seed_<n>, or <cell>/seed_<n> of a grid).
  parent = (os.path.commonpath([r.output_dir for r in runs]) if len(runs) > 1
            else os.path.dirname(runs[0].output_dir))

  def interrupted():
    stops = {os.path.relpath(r.output_dir, parent): r.stopped_at() for r in runs}
    return Interrupted(interrupted_message(parent, stops))
  try:
    with one_line_errors(lambda: current_run, interrupted), \
        termination.epoch_finishes_first():
      while not all(loop.done for loop in loops):
        start = time.perf_counter()
        loops[0].begin()  # the first epoch compiles: say so, with progress lines
        if ahead.current is None and together:
          # In the first epoch, as a lone run does.
          compile_evaluation(trainers, batch.start(None)[0])
        read = ahead.read_next(start)
        for j in range(read.call.n):
          for i, (run, loop) in enumerate(zip(runs, loops)):
            if loop.done:
              continue
            evaluation = read.evaluations.get(i) if j == read.call.n - 1 else None
            current_run = run
            loop.finish(run.learner.run_epoch(
                outputs=batch.epoch_outputs(read, i, j, evaluation), seconds=read.seconds,
                evaluation=evaluation), start)
      if any(loop.stopped for loop in loops):
        raise loop_lib.Stopped  # every seed checkpointed the epoch it stopped at
      for run in runs:
        current_run = run
        run.checkpointer.wait()  # every seed's last checkpoint is on disk before the job says done
  finally:
    loops[0].end_progress()
