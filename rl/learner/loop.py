"""The epoch loop: a learner's epochs with their bookkeeping (history, metrics, console,
checkpoints, stopping)."""
import time

from rl import console as console_lib
from rl import metrics as metrics_lib
from rl import termination
from rl.learner import time_left as time_left_lib


class EpochLoop:
  """What happens around each epoch of one learner.

  Apart from the epochs themselves, so that several learners whose epochs run
  together (rl.seeds: many seeds in one compiled call) each keep their own
  bookkeeping. `done` says whether the learner should run another epoch.

  console: rl.console.console_settings() to throttle the epoch lines (`log`
  then takes quiet=True for a line that goes to log.txt only) and report the
  first epoch's progress (`log` takes progress=True for those lines); None: every line, no progress lines. later:
  (plain, evaluating) epochs of the runs that follow this one in the same job
  (--seeds on gymnasium envs), for the time the job has left. clock: seconds
  (time.perf_counter); tests pass their own. throttle: a console.Throttle
  shared with other loops (the seeds of a --seeds job share one, so that the
  job's console has one line per interval, not one per seed).
  """

  def __init__(self, learner, n_epochs, checkpoint_fn=None, checkpoint_every=10, writer=None,
               log=None, stop_at_return=None, console=None, later=(0, 0),
               clock=time.perf_counter, throttle=None):
    self.learner = learner
    self.n_epochs = n_epochs
    self._checkpoint_fn = checkpoint_fn
    self._checkpoint_every = checkpoint_every
    self._writer = writer
    self._log = log
    self._stop_at_return = stop_at_return
    self._console = console
    self._later = later
    self.clock = clock
    self._throttle = throttle or (console and console_lib.Throttle(
        console['every_seconds'], console['verbose'], clock))
    self._time_left = time_left_lib.TimeLeft(clock)
    self._heartbeat = None
    # The first epoch this process runs compiles the jitted steps.
    self._first_epoch = None
    # Throughput since the last console line: (env steps then, the epochs' seconds since).
    self._since = None
    # Set when a Ctrl-C or SIGTERM stopped the run at an epoch it checkpointed.
    self.stopped = False
    learner.last_epoch = n_epochs
    # A JAX-native call of several epochs ends where booking reads the state.
    learner.reads_state = self.needs_state
    history = learner.history
    self.done = learner.epoch >= n_epochs or bool(history and self._reached(history[-1]))
    if self.done:
      learner.last_epoch = learner.epoch  # no epoch is run ahead of a run that is done

  def needs_state(self, epoch, evaluation=None):
    """Whether booking epoch `epoch` reads the learner's state: it checkpoints, ends the run,
    or evaluates (rl.seeds hands each seed its state only then).

    evaluation: the epoch's evaluation when the caller played it already
    (rl.seeds evaluates a batch's seeds together, `Learner.run_epoch`'s
    `evaluation`). The evaluation then reads no state, and the epoch needs it
    only for the checkpoint of a run that reaches its target return.
    """
    learner = self.learner
    if termination.stop_asked():
      return True  # the run stops at the next epoch whose state it can checkpoint
    if epoch >= self.n_epochs or (self._checkpoint_fn is not None
                                  and epoch % self._checkpoint_every == 0):
      return True
    if not learner.evaluates(epoch):
      return False
    if evaluation is None:
      return True
    return self._checkpoint_fn is not None and self._reached(evaluation[0])

  def _reached(self, record):
    value = record.get('eval_return')
    return (self._stop_at_return is not None and value is not None
            and value >= self._stop_at_return)

  def begin(self):
    """Called as an epoch starts: before the process's first, says it compiles and starts
    its progress lines."""
    if self._first_epoch is not None or self._console is None or self._log is None:
      return
    learner = self.learner
    epoch = learner.epoch + 1
    self._log(console_lib.compiling_line(epoch, self.n_epochs, learner.task.jax_native),
              progress=True)
    if self._console['progress_seconds'] > 0:
      started = self.clock()
      def status():
        task = learner.task
        steps = task.n_interactions + getattr(task, 'steps_collecting', 0)
        so_far = f'{steps:,} env steps so far, ' if steps else ''
        return (f'epoch {epoch}/{self.n_epochs}: {learner.phase} '
                f'({so_far}{console_lib.elapsed(self.clock() - started)}) ...')
      say = lambda line: self._log(line, progress=True)
      self._heartbeat = console_lib.Heartbeat(say, status,
                                              self._console['progress_seconds']).start()

  def end_progress(self):
    """Stops the first epoch's progress lines (at its end, or when the run stops)."""
    if self._heartbeat is not None:
      self._heartbeat.stop()
      self._heartbeat = None

  def finish(self, record, epoch_start):
    """Books the epoch that began at `epoch_start` (clock) and produced `record`."""
    self.end_progress()
    learner = self.learner
    evaluated = 'eval_return' in record
    self._time_left.epoch_done(evaluated)
    first = self._first_epoch is None
    if first:
      # Compiling makes the first epoch many times longer than the next: its
      # seconds are logged apart and the time left is estimated without it.
      self._first_epoch = learner.epoch
      record['time_compile'] = self.clock() - epoch_start
    learner.history.append(metrics_lib.clean(record))
    if self._writer is not None:
      self._writer.write(record)
    reached = self._reached(record)
    last = reached or learner.epoch >= self.n_epochs
    if self._log is not None:
      self._console_line(record, first, evaluated, last)
    checkpoint = self._checkpoint_fn is not None and (
        learner.epoch % self._checkpoint_every == 0 or learner.epoch == self.n_epochs or reached)
    # Asked to stop: checkpoint this epoch when its state is at hand (a
    # JAX-native call's last epoch) and stop after it.
    self.stopped = not last and termination.stop_asked() and learner.state_is_current
    if checkpoint or (self.stopped and self._checkpoint_fn is not None):
      self._checkpoint_fn()
    if reached and self._log is not None:
      self._log(f'Stopping: eval return {record["eval_return"]:.1f} reached '
                f'train_rl.stop_at_return = {self._stop_at_return}.')
    self.done = last or self.stopped
    if reached:
      # The run's last epoch: nothing more is run ahead for it (rl.learner.look_ahead).
      learner.last_epoch = learner.epoch

  def _console_line(self, record, first, evaluated, last):
    """The epoch's line: to the console when due (first, last, evaluating, or its interval
    passed), else to log.txt only.

    Its throughput counts the env steps since the last line shown over the
    epochs' own collection and training seconds (evaluation left out), not the
    clock between the lines: a JAX-native call's epochs are booked together
    (rl.learner.look_ahead), each with its share of the call's time.
    """
    steps_per_second, seconds = None, None
    if self._since is not None:
      steps, seconds = self._since
      seconds += record.get('time_collect', 0.0) + record.get('time_train', 0.0)
      steps_per_second = (record['env_steps'] - steps) / seconds if seconds > 0 else None
    options = self.learner.options
    plain, evaluating = time_left_lib.epochs_left(self.learner.epoch, self.n_epochs,
                                                  options.eval_every, options.n_eval_episodes)
    left = None if first else self._time_left.estimate(plain + self._later[0],
                                                       evaluating + self._later[1])
    line = metrics_lib.console_line(record, self.n_epochs, left, steps_per_second)
    shown = self._throttle is None or self._throttle.show(forced=first or evaluated or last)
    if shown:
      self._log(line)
    else:
      self._log(line, quiet=True)
    if shown or self._since is None:
      self._since = (record['env_steps'], 0.0)
    else:
      self._since = (self._since[0], seconds)


class Stopped(KeyboardInterrupt):
  """A Ctrl-C or SIGTERM stopped the run after an epoch it checkpointed; handled as Ctrl-C."""


def run(loop):
  """Runs the loop's learner epoch by epoch until the loop is done (the one epoch driver).

  A Ctrl-C or SIGTERM lets the epoch under way finish and be checkpointed,
  then raises Stopped (rl.termination); a second one stops at once.
  """
  try:
    with termination.epoch_finishes_first():
      while not loop.done:
        epoch_start = loop.clock()
        loop.begin()
        loop.finish(loop.learner.run_epoch(), epoch_start)
    if loop.stopped:
      raise Stopped
  finally:
    loop.end_progress()
