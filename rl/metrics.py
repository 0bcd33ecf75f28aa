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

import numpy as np

from rl.errors import WriteFailed
from rl.errors import write_failure_reason
from rl.console import elapsed

METRICS_FILE = 'metrics.jsonl'
# Wall-clock fields: they differ between otherwise identical runs.
TIMING_KEYS = ('time_collect', 'time_eval', 'time_train', 'time_compile',
               'env_steps_per_second', 'steps_per_second', 'policy_steps_per_second',
               'value_steps_per_second')


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
  """

  def __init__(self, output_dir, history=(), summary_dirs=None):
    """Args: summary_dirs: {subfolder: key prefix}; scalars whose key starts
    with the prefix go to TensorBoard files in output_dir/subfolder (e.g. the
    value network's metrics in output_dir/value), the rest to output_dir/tensorboard.
    """
    self._path = os.path.join(output_dir, METRICS_FILE)
    tmp = self._path + '.tmp'
    with open(tmp, 'w') as f:
      for record in history:
        f.write(json.dumps(clean(record)) + '\n')
    os.replace(tmp, self._path)
    self._file = open(self._path, 'a')
    self._output_dir = output_dir
    self._last_epoch = history[-1]['epoch'] if history else 0
    self._routes = [(prefix, sub) for sub, prefix in (summary_dirs or {}).items()]
    # Opened at their first scalar: a FileWriter creates its event file at
    # once, so a rerun with no epoch left would add an empty one.
    self._writers = {}  # subfolder -> tensorboardX FileWriter

  def _writer(self, subfolder):
    if subfolder not in self._writers:
      # Imported at the first scalar, not with this module: tensorboardX pulls
      # in protobuf (and boto3 where installed), which nothing needs before the
      # first epoch ends.
      # pylint: disable=import-outside-toplevel
      from tensorboardX import FileWriter
      from tensorboardX.proto.event_pb2 import Event
      from tensorboardX.proto.event_pb2 import SessionLog
      writer = FileWriter(os.path.join(self._output_dir, subfolder), flush_secs=30)
      # A session start at the first epoch to come hides, in TensorBoard, the
      # events of epochs that ran after the checkpoint a resume starts from.
      step = self._last_epoch + 1
      writer.add_event(Event(step=step, file_version='brain.Event:2'))
      writer.add_event(Event(step=step, session_log=SessionLog(status=SessionLog.START)))
      self._writers[subfolder] = writer
    return self._writers[subfolder]

  def _subfolder_for(self, key):
    return next((sub for prefix, sub in self._routes if key.startswith(prefix)), 'tensorboard')

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
    scalars = {}  # subfolder -> [(tag, value)]
    for k, v in record.items():
      if k not in ('epoch', 'env_steps') and isinstance(v, (int, float)) and v is not None:
        scalars.setdefault(self._subfolder_for(k), []).append((k, v))
    scalars.setdefault('tensorboard', []).append(('env_steps', record['env_steps']))
    for subfolder, values in scalars.items():
      self._add_scalars(subfolder, values, record['epoch'])

  def _add_scalars(self, subfolder, values, step):
    """One TensorBoard event holding all of an epoch's scalars of one subfolder.

    What add_scalar writes, tag by tag, but in one event rather than one per
    tag: each event crosses tensorboardX's process-safe writer queue, a cost
    that short epochs with many metrics would otherwise pay once per metric.
    TensorBoard reads several values in an event as it reads one.
    """
    from tensorboardX.proto.summary_pb2 import Summary  # pylint: disable=import-outside-toplevel
    # The values add_scalar makes (a float32 simple_value per tag), made
    # directly: a tenth of the time of tensorboardX's summary.scalar.
    merged = Summary(value=[Summary.Value(tag=tag, simple_value=float(x)) for tag, x in values])
    self._writer(subfolder).add_summary(merged, global_step=step)

  def close(self):
    self._file.close()
    for tb in self._writers.values():
      tb.close()


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
