"""Many seeds of one config in one process: their epochs vmapped into one compiled call.

`python -m rl.run --config_file=X --seeds=0-7` builds one ordinary run per
seed (its own folder, checkpoints, metrics and log; rl.experiment.prepared_run). On
JAX-native envs every seed's whole epoch (collection, advantages, gradient
steps) is the same pure function of that seed's state (RLTrainer.jax_epoch),
so `train_together` stacks the seeds' states and runs that function under
`jax.vmap`: one call for all of them, several epochs to a call as a lone
run's (rl.learner.look_ahead), and likewise one call per evaluation
(`play_together`). Each seed then books its epoch as a lone
run would (metrics, checkpoints, the stop at a target return), which is why
each seed's folder resumes and reads like any other run's. A seed that stops
early (its target reached) rides along in the batch, its results dropped,
until the others are done: the batch keeps its shape and so its compiled
program.
"""
import collections
import os
import time
from typing import NamedTuple

import jax
import numpy as np

from rl import compiler
from rl import keys
from rl import metrics as metrics_lib
from rl.envs.task import MAX_SEED
from rl.errors import ConfigError
from rl.errors import Interrupted
from rl.errors import NonFiniteLossError
from rl.errors import WriteFailed
from rl.learner import look_ahead
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
  where = '; '.join(
      f'{name} in epoch {epoch}/{n_epochs} (last checkpoint: '
      f"{'none' if checkpoint is None else f'epoch {checkpoint}'})"
      for name, (epoch, n_epochs, checkpoint) in stops.items())
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


class _Call(NamedTuple):
  """The batch's epochs dispatched in one call, not yet read."""
  n: int  # epochs per seed
  outputs: tuple  # (stacked state, stacked carry, outputs [seeds, epochs, ...]), futures
  played: dict  # play_together's returns after the call's last epochs, or None
  evaluating: list  # the seeds (indices) that evaluate after the call's last epoch


def train_together(runs):
  """Trains PreparedRuns (rl.experiment) of one config and different seeds, vmapped (module doc)."""
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
  evaluation_compiled = not together
  program = compiler.jit(jax.vmap(
      look_ahead.epochs_program(lead.jax_epoch, lead.jax_epoch_steps),
      in_axes=(0, 0, 0, 0, None)))
  loops = [r.epoch_loop() for r in runs]
  first_call = True

  def dispatch(states, ahead):
    """The call of every seed's epochs from `ahead` epochs after its current one on, and the
    evaluation behind it; None when no seed has epochs left there."""
    nonlocal first_call
    active = [(loop, t) for loop, t in zip(loops, trainers) if not loop.done]
    if not any(t.epoch + ahead < loop.n_epochs for loop, t in active):
      return None
    # Each seed's epoch numbers and what they imply (DQN's epsilon): resumed
    # seeds need not stand at the same epoch. The call ends where any seed's
    # booking reads its state; the process's first call runs one epoch.
    n = 1 if first_call else min(
        look_ahead.call_length(t.epoch + 1 + ahead, loop.n_epochs, loop.needs_state)
        for loop, t in active if t.epoch + ahead < loop.n_epochs)
    first_call = False
    inputs = _stack_host([look_ahead.call_inputs(t.epoch_args, t.epoch + 1 + ahead, n)
                          for t in trainers])
    outputs = program(*states, *inputs, np.int32(n))
    evaluating = [i for i, (loop, t) in enumerate(zip(loops, trainers))
                  if not loop.done and t.epoch + ahead + n <= loop.n_epochs
                  and t.evaluates(t.epoch + ahead + n)]
    played = (play_together(trainers, outputs[0], ahead + n)
              if together and evaluating else None)
    return _Call(n, outputs, played, evaluating)

  current, queued = None, collections.deque()
  current_run = runs[0]
  read_at = None  # perf_counter time the last call's read ended
  try:
    while not all(loop.done for loop in loops):
      start = time.perf_counter()
      loops[0].begin()  # the first epoch compiles: say so, with progress lines
      # The states stay stacked on the device from one call to the next; a
      # seed's own copy is read back only for its bookkeeping.
      if current is None:
        current = (_stack([t.train_state for t in trainers]),
                   _stack([t.task.carry for t in trainers]))
      if not evaluation_compiled:
        compile_evaluation(trainers, current[0])  # in the first epoch, as a lone run does
        evaluation_compiled = True
      call = queued.popleft() if queued else dispatch(current, 0)
      current = call.outputs[:2]
      # The next calls, each a function of the one before's outputs only, run
      # on the device while this one is booked on the host (the numbers are
      # those of one epoch after the other), each behind its predecessor's
      # evaluation: CALLS_AHEAD of them, so that a checkpoint of every seed
      # (more host work than a call's device time) leaves the device busy.
      while len(queued) < CALLS_AHEAD:
        last = queued[-1] if queued else call
        following = dispatch(last.outputs[:2], call.n + sum(c.n for c in queued))
        if following is None:
          break
        queued.append(following)
      begun = start if read_at is None else min(start, read_at)
      host = jax.device_get(call.outputs[2])
      read_at = time.perf_counter()
      # The evaluation runs on the device after the call: read after it, its
      # seconds are its own, and the call's time is shared by its epochs.
      seconds, evaluations = (read_at - begun) / call.n, {}
      if call.played is not None:
        returns = jax.device_get(call.played)
        evaluated = time.perf_counter()
        evaluations = read_together(returns, call.evaluating, evaluated - read_at)
        read_at = evaluated
      # Each seed's metrics; its state only for an epoch whose booking reads it
      # (a checkpoint, the last, an evaluation played alone), read back once for all.
      states = None
      for j in range(call.n):
        for i, (run, loop, trainer) in enumerate(zip(runs, loops, trainers)):
          if loop.done:
            continue
          mine, evaluation = (None, None), None
          if j == call.n - 1:
            evaluation = evaluations.get(i)
            if loop.needs_state(trainer.epoch + 1, evaluation):
              states = _read_states(call.outputs[:2]) if states is None else states
              mine = _seed_states(states, i)
          mine += jax.tree_util.tree_map(lambda x, i=i, j=j: x[i][j], host)
          current_run = run
          loop.finish(run.learner.run_epoch(outputs=mine, seconds=seconds,
                                            evaluation=evaluation), start)
    for run in runs:
      current_run = run
      run.checkpointer.wait()  # every seed's last checkpoint is on disk before the job says done
  except KeyboardInterrupt:
    stops = {os.path.basename(r.output_dir): r.stopped_at() for r in runs}
    raise Interrupted(interrupted_message(os.path.dirname(runs[0].output_dir), stops)) from None
  except NonFiniteLossError as e:
    raise current_run.non_finite(e) from None
  except WriteFailed as e:
    raise current_run.write_failed(e) from None
  finally:
    loops[0].end_progress()
