"""MetricsWriter: metrics.jsonl and the TensorBoard event files read back."""
import math
import os
import struct

from rl.metrics import MetricsWriter
from rl.metrics import read_metrics


def events(folder):
  """Every event of the event files in `folder`, in order (TFRecord framing, tensorboardX's protos)."""
  from tensorboardX.proto.event_pb2 import Event  # pylint: disable=import-outside-toplevel
  out = []
  for name in sorted(os.listdir(folder)):
    with open(os.path.join(folder, name), 'rb') as f:
      data = f.read()
    pos = 0
    while pos < len(data):
      (length,) = struct.unpack('<Q', data[pos:pos + 8])
      pos += 12  # the length and its checksum
      out.append(Event.FromString(data[pos:pos + length]))
      pos += length + 4  # the data's checksum
  return out


def scalars(folder):
  """{tag: {step: value}} of the events in `folder`."""
  out = {}
  for event in events(folder):
    for value in event.summary.value:
      out.setdefault(value.tag, {})[event.step] = value.simple_value
  return out


def test_every_scalar_is_one_event_per_epoch_at_its_env_steps(tmp_path):
  writer = MetricsWriter(str(tmp_path))
  for epoch in (1, 2):
    writer.write({'epoch': epoch, 'env_steps': 256 * epoch, 'train_return': 10.0 * epoch,
                  'policy_loss': -0.5, 'value_loss': 2.0 / epoch, 'eval_return': math.nan})
  writer.close()
  assert [r['epoch'] for r in read_metrics(tmp_path)] == [1, 2]
  assert read_metrics(tmp_path)[0]['eval_return'] is None  # NaN: null in the JSON, no scalar
  # One TensorBoard run per run folder; the x axis is env steps, the epoch a scalar.
  assert os.listdir(tmp_path / 'tensorboard') and not os.path.exists(tmp_path / 'value')
  assert scalars(tmp_path / 'tensorboard') == {
      'epoch': {256: 1.0, 512: 2.0}, 'train_return': {256: 10.0, 512: 20.0},
      'policy_loss': {256: -0.5, 512: -0.5}, 'value_loss': {256: 2.0, 512: 1.0}}
  # All of an epoch's scalars travel in one event.
  assert [e.step for e in events(tmp_path / 'tensorboard') if e.summary.value] == [256, 512]


def test_a_resumed_writer_starts_a_tensorboard_session_at_its_first_epoch(tmp_path):
  # TensorBoard drops the events of steps at and after a session start's step
  # that came before it: those of epochs run after the checkpoint resumed from.
  history = [{'epoch': 1, 'env_steps': 10}, {'epoch': 2, 'env_steps': 20}]
  writer = MetricsWriter(str(tmp_path), history=history)
  writer.write({'epoch': 3, 'env_steps': 30, 'loss': 0.5})
  writer.close()
  from tensorboardX.proto.event_pb2 import SessionLog  # pylint: disable=import-outside-toplevel
  starts = [e.step for e in events(tmp_path / 'tensorboard')
            if e.session_log.status == SessionLog.START]
  assert starts == [21]  # the env steps after the checkpoint's
  assert scalars(tmp_path / 'tensorboard') == {'epoch': {30: 3.0}, 'loss': {30: 0.5}}
  assert [r['epoch'] for r in read_metrics(tmp_path)] == [1, 2, 3]
