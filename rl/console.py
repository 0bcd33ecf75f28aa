"""What a run prints on the console, and when.

log.txt and metrics.jsonl keep a record of every epoch; the console shows the
first epoch a process runs, the last, every evaluating epoch and otherwise at
most one epoch line every `console.every_seconds` (`console.verbose = True`,
or rl.run's --verbose, shows every epoch). While the first epoch compiles, a
progress line comes every `console.progress_seconds`. The lines that open and
close a run (what runs where; the next steps) are built here too.
"""
import shlex
import threading
import time


from rl.configurables import configurable


@configurable('console')
def console_settings(verbose=False, every_seconds=5.0, progress_seconds=15.0):
  """How much a run prints on the console (log.txt and metrics.jsonl keep every epoch).

  Args:
    verbose: print every epoch's line (rl.run --verbose sets it).
    every_seconds: otherwise at most one epoch line this often, besides the
      first and last epoch and every evaluating epoch.
    progress_seconds: while the first epoch of a process runs (it compiles),
      a line saying what it is doing this often; 0 turns them off.
  """
  return {'verbose': bool(verbose), 'every_seconds': float(every_seconds),
          'progress_seconds': float(progress_seconds)}


def plural(n, word):
  """'1 epoch', '2 epochs', '99,840 env steps'."""
  return f'{n:,} {word}{"" if n == 1 else "s"}'


class Throttle:
  """Which epoch lines reach the console: forced ones, and one every `every_seconds`.

  clock: seconds (time.monotonic); tests pass their own.
  """

  def __init__(self, every_seconds=5.0, verbose=False, clock=time.monotonic):
    self._every = every_seconds
    self._verbose = verbose
    self._clock = clock
    self._last = None

  def show(self, forced=False):
    """Whether this line goes to the console; a shown line restarts the interval."""
    now = self._clock()
    if self._verbose or forced or self._last is None or now - self._last >= self._every:
      self._last = now
      return True
    return False


class Heartbeat:
  """Says `status()` through `say` every `every` seconds until stopped.

  For the first epoch of a process, which compiles and may run for minutes
  without a line. The lines come from a thread of their own; `stop` waits for
  it, so no progress line follows the epoch's own. wait(stop_event) -> True
  to stop: waits for the next beat (tests pass their own, to beat on demand).
  """

  def __init__(self, say, status, every, wait=None):
    self._say = say
    self._status = status
    self._stop = threading.Event()
    self._wait = wait or (lambda stop: stop.wait(every))
    self._thread = threading.Thread(target=self._beat, daemon=True, name='rl-progress')

  def start(self):
    self._thread.start()
    return self

  def _beat(self):
    while not self._wait(self._stop) and not self._stop.is_set():
      self._say(self._status())

  def stop(self):
    self._stop.set()
    if self._thread.is_alive():
      self._thread.join()


def elapsed(seconds):
  """'0:42', '1:02:03'."""
  seconds = int(seconds)
  h, rem = divmod(seconds, 3600)
  m, s = divmod(rem, 60)
  return f'{h}:{m:02d}:{s:02d}' if h else f'{m}:{s:02d}'


def opening_line(config_files, n_bindings, output_dir, seeds=None, grid=()):
  """The line rl.run prints as it starts, before JAX is imported: the config and the folder.

  seeds: the --seeds text, if given; grid: the --grid texts.
  """
  source = ', '.join(config_files) if config_files else f'the config saved in {output_dir}'
  if n_bindings:
    source += f' with {plural(n_bindings, "binding")}'
  what = f'seeds {seeds} of ' if seeds else ''
  if grid:
    names = ', '.join(text.partition('=')[0].strip() for text in grid)
    what = f'a grid over {names}, {what or "of "}'
  return f'rl.run: {what}{source} -> {output_dir}; importing JAX ...'


def run_line(env, trainer, epoch, n_epochs, complete, output_dir):
  """What a prepared run is: where, fresh or resumed (or already complete), env and trainer."""
  what = f'{env}, trainer {trainer}'
  if n_epochs == 0:
    return (f'{output_dir} is set up ({what}) with train_rl.n_epochs = 0: nothing to train; '
            'raise n_epochs and rerun to train it.')
  if complete:
    return (f'{output_dir} is already complete: {epoch}/{plural(n_epochs, "epoch")} '
            f'({what}); nothing to train.')
  if epoch == 0:
    return f'Starting {output_dir}: {what}, {plural(n_epochs, "epoch")}.'
  return f'Resuming {output_dir} from epoch {epoch}/{n_epochs}: {what}.'


def compiling_line(epoch, n_epochs, jax_native):
  what = 'the whole epoch as one program' if jax_native else 'acting and training'
  return f'epoch {epoch}/{n_epochs}: compiling {what} (the first epoch of a process is slow) ...'


def next_steps(run_dir, job_dir=None):
  """What to do with a finished run: evaluate it, view its curves, summarise the job.

  job_dir: the folder of all the job's runs (--seeds), which TensorBoard and
  rl.report read whole; by default the run's own.
  """
  run_dir, job_dir = shlex.quote(run_dir), shlex.quote(job_dir or run_dir)
  # A command a line, each pasteable into a shell on its own.
  return '\n'.join(['Next:', f'  python -m rl.evaluate --output_dir={run_dir}',
                    f'  tensorboard --logdir {job_dir}', f'  python -m rl.report {job_dir}'])
