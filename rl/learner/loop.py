"""The epoch loop: a learner's epochs with their bookkeeping (history, metrics, console,
checkpoints, stopping)."""
import time

from rl import metrics as metrics_lib


class EpochLoop:
  """What happens around each epoch of one learner.

  Apart from the epochs themselves, so that several learners whose epochs run
  together (rl.seeds: many seeds in one compiled call) each keep their own
  bookkeeping. `done` says whether the learner should run another epoch.
  """

  def __init__(self, learner, n_epochs, checkpoint_fn=None, checkpoint_every=10, writer=None,
               log=None, stop_at_return=None):
    self.learner = learner
    self.n_epochs = n_epochs
    self._checkpoint_fn = checkpoint_fn
    self._checkpoint_every = checkpoint_every
    self._writer = writer
    self._log = log
    self._stop_at_return = stop_at_return
    # The first epoch this process runs compiles the jitted steps.
    self._first_epoch = self._timed_from = None
    learner.last_epoch = n_epochs
    history = learner.history
    self.done = learner.epoch >= n_epochs or bool(history and self._reached(history[-1]))

  def _reached(self, record):
    value = record.get('eval_return')
    return (self._stop_at_return is not None and value is not None
            and value >= self._stop_at_return)

  def finish(self, record, epoch_start):
    """Books the epoch that began at `epoch_start` (perf_counter) and produced `record`."""
    learner = self.learner
    if self._first_epoch is None:
      # Compiling makes the first epoch many times longer than the next: its
      # seconds are logged apart and the time left is estimated without it.
      self._first_epoch, self._timed_from = learner.epoch, time.perf_counter()
      record['time_compile'] = self._timed_from - epoch_start
      per_epoch = None
    else:
      per_epoch = (time.perf_counter() - self._timed_from) / (learner.epoch - self._first_epoch)
    learner.history.append(metrics_lib.clean(record))
    if self._writer is not None:
      self._writer.write(record)
    if self._log is not None:
      self._log(metrics_lib.console_line(record, self.n_epochs, per_epoch))
    reached = self._reached(record)
    if self._checkpoint_fn is not None and (learner.epoch % self._checkpoint_every == 0
                                            or learner.epoch == self.n_epochs or reached):
      self._checkpoint_fn()
    if reached and self._log is not None:
      self._log(f'Stopping: eval return {record["eval_return"]:.1f} reached '
                f'train_rl.stop_at_return = {self._stop_at_return}.')
    self.done = reached or learner.epoch >= self.n_epochs


def run(loop):
  """Runs the loop's learner epoch by epoch until the loop is done (the one epoch driver)."""
  while not loop.done:
    epoch_start = time.perf_counter()
    loop.finish(loop.learner.run_epoch(), epoch_start)
