"""Per-epoch metrics: metrics.jsonl, TensorBoard event files and the console line.

One record per epoch, with stable keys users can script against:
  epoch, env_steps, n_trajectories, train_return, eval_return (greedy mean),
  eval_return_temperature_<T> (other temperatures), the trainer's losses and
  metrics under their own names, time_collect, time_eval, time_train (seconds),
  and in the first epoch a process runs (a start or a resume) time_compile: that
  whole epoch's seconds, which include compiling the jitted functions.
NaN (e.g. no episode ended in an epoch) is written as null, so the file is
strict JSON lines.
"""
import contextlib
import json
import math
import os
import time

import numpy as np

from rl.errors import WriteFailed
from rl.errors import write_failure_reason
from rl.console import elapsed

METRICS_FILE = 'metrics.jsonl'
# Wall-clock fields: they differ between otherwise identical runs.
TIMING_KEYS = ('time_collect', 'time_eval', 'time_train', 'time_compile',
               'env_steps_per_second', 'steps_per_second', 'policy_steps_per_second',
               'value_steps_per_second', 'actor_steps_per_second', 'critic_steps_per_second',
               'alpha_steps_per_second')


def eval_key(temperature):
  """The metrics key of the eval return at `temperature` (0 is plain eval_return)."""
  return 'eval_return' if temperature == 0 else f'eval_return_temperature_{temperature:g}'


def eval_metrics(returns):
  """{eval_key(temperature): mean return} of {temperature: the episodes' returns}."""
  return {eval_key(t): float(np.mean(np.asarray(r, np.float64))) for t, r in returns.items()}


def clean(record):
  """JSON-safe copy: non-finite floats become None."""
  out = {}
  for k, v in record.items():
    if isinstance(v, float) and not math.isfinite(v):
      v = None
    out[k] = v
  return out


class MetricsWriter:
  """Appends epoch records to metrics.jsonl and TensorBoard in `output_dir`.

  `history` (the records of the epochs already done, from the checkpoint) is
  written back first: on a resume this drops the records of epochs that ran
  after the last checkpoint, so the file matches the restored state exactly.

  TensorBoard gets one run per run folder, output_dir/tensorboard, with every
  scalar of a record (the epoch among them) at the record's env steps: runs
  of different algorithms, whose epochs hold different numbers of env steps,
  line up on one x axis.
  """

  def __init__(self, output_dir, history=()):
    self._path = os.path.join(output_dir, METRICS_FILE)
    tmp = self._path + '.tmp'
    with open(tmp, 'w') as f:
      for record in history:
        f.write(json.dumps(clean(record)) + '\n')
    os.replace(tmp, self._path)
    self._file = open(self._path, 'a')
    self._folder = os.path.join(output_dir, 'tensorboard')
    # TensorBoard hides the events at and after this step written before the
    # session starts: those of epochs that ran after the checkpoint resumed from.
    self._first_step = history[-1]['env_steps'] + 1 if history else 0
    # Opened at its first scalar: an event file is created at once, so a rerun
    # with no epoch left would add an empty one.
    self._event_file = None

  def write(self, record):
    record = clean(record)
    try:
      self._file.write(json.dumps(record) + '\n')
      self._file.flush()
    except OSError as e:
      # Closed at once, its unwritten rest dropped, so that `close` does not
      # fail on it again. A resume rewrites the file from its checkpoint.
      with contextlib.suppress(OSError):
        self._file.close()
      raise WriteFailed(self._path, write_failure_reason(e)) from None
    scalars = [(k, v) for k, v in record.items()
               if k != 'env_steps' and isinstance(v, (int, float)) and v is not None]
    if self._event_file is None:
      self._event_file = EventFile(self._folder, self._first_step)
    self._event_file.add_scalars(scalars, record['env_steps'])

  def close(self):
    """Closes every file, then raises the first failure (WriteFailed) if any."""
    failures = []
    try:
      self._file.close()
    except OSError as e:
      failures.append(WriteFailed(self._path, write_failure_reason(e)))
    if self._event_file is not None:
      try:
        self._event_file.close()
      except WriteFailed as e:
        failures.append(e)
    if failures:
      raise failures[0]


class EventFile:
  """One TensorBoard event file in `folder`, written on the caller's thread.

  Through tensorboardX's EventsWriter (the TFRecord framing and checksums),
  not its FileWriter: that one hands each event through a process-safe
  queue to a thread of its own, which more than doubles an event's CPU
  (docs/performance.md), taken from the cores the training runs on. The
  file is flushed to disk every FLUSH_SECONDS, as FileWriter does, and at
  `close`. A failed write raises WriteFailed.

  `first_step`: the step of the first epoch to come (its env steps). A
  session start there hides, in TensorBoard, the events of epochs that ran
  after the checkpoint a resume starts from.
  """

  FLUSH_SECONDS = 30.0

  def __init__(self, folder, first_step):
    # Imported at the first scalar, not with this module: tensorboardX pulls
    # in protobuf (and boto3 where installed), which nothing needs before the
    # first epoch ends.
    # pylint: disable=import-outside-toplevel
    from tensorboardX.event_file_writer import EventsWriter
    from tensorboardX.proto.event_pb2 import Event
    from tensorboardX.proto.event_pb2 import SessionLog
    from tensorboardX.proto.summary_pb2 import Summary
    self._folder = folder
    self._event, self._summary = Event, Summary
    self._writer = None
    self._flushed = time.monotonic()
    with self._failing_as_write_failed():
      os.makedirs(folder, exist_ok=True)
      self._writer = EventsWriter(os.path.join(folder, 'events'))
      self._writer.write_event(Event(wall_time=time.time(), step=first_step,
                                     session_log=SessionLog(status=SessionLog.START)))

  @contextlib.contextmanager
  def _failing_as_write_failed(self):
    """Turns an OSError into WriteFailed and drops the file: what it had not written is lost,
    and `close` does not fail on it again (a resume writes the events again)."""
    try:
      yield
    except OSError as e:
      self._writer = None
      raise WriteFailed(self._folder, write_failure_reason(e)) from None

  def add_scalars(self, values, step):
    """One event holding all of `values` ([(tag, number)]) at `step`.

    What tensorboardX's add_scalar writes tag by tag (a float32
    simple_value per tag), made directly and in one event: TensorBoard reads
    several values in an event as it reads one.
    """
    if self._writer is None:
      return  # failed before, and said so then
    Summary = self._summary  # pylint: disable=invalid-name
    summary = Summary(value=[Summary.Value(tag=tag, simple_value=float(x)) for tag, x in values])
    with self._failing_as_write_failed():
      self._writer.write_event(self._event(wall_time=time.time(), step=step, summary=summary))
      if time.monotonic() - self._flushed >= self.FLUSH_SECONDS:
        self._writer.flush()
        self._flushed = time.monotonic()

  def close(self):
    if self._writer is not None:
      with self._failing_as_write_failed():
        self._writer.close()


def read_metrics(output_dir):
  with open(os.path.join(output_dir, METRICS_FILE)) as f:
    return [json.loads(line) for line in f if line.strip()]


def format_return(v):
  """A return as the console shows it: one decimal, 'n/a' for none (no episode ended)."""
  return 'n/a' if v is None or (isinstance(v, float) and not math.isfinite(v)) else f'{v:.1f}'


def console_line(record, n_epochs, left, steps_per_second):
  """'epoch 12/100 | env steps 24,000 | train 87.3 | eval 120.0 | 3,400 steps/s | left 0:42'.

  left: (seconds, exact) for the job's time left; exact False marks it a
  lower bound ('left 0:42+'); None: not known yet. The process's first
  epoch compiles: its time (time_compile) is shown instead. steps_per_second:
  env steps per second since the previous console line, evaluation left out
  (None: not shown).
  """
  parts = [f"epoch {record['epoch']}/{n_epochs}",
           f"env steps {record['env_steps']:,}",
           f"train {format_return(record.get('train_return'))}"]
  if 'eval_return' in record:
    parts.append(f"eval {format_return(record.get('eval_return'))}")
  if steps_per_second:
    parts.append(f'{steps_per_second:,.0f} steps/s')
  if 'time_compile' in record:
    parts.append(f"{record['time_compile']:.1f} s incl. compiling")
  elif left is not None:
    seconds, exact = left
    parts.append(f"left {elapsed(seconds)}{'' if exact else '+'}")
  return ' | '.join(parts)
