"""A learner's history (its epochs' records) as checkpoint arrays: the bytes of its JSON lines.

A checkpoint holds the whole history, so a resumed run writes metrics.jsonl
back exactly as the restored state left it. In the checkpoint's JSON the
history would be encoded again at every save, about 15 ms a save at 1,100
epochs and growing with the run; as bytes in its arrays, each record is
encoded once and a save copies them.
"""
import json

import numpy as np


class HistoryBytes:
  """Encodes a history list as JSON lines, each record once, for the checkpoints of one learner.

  The records already encoded are reused while the list is the same object
  and only grows (the epoch loop appends to it); a list replaced by a restore
  is encoded afresh.
  """

  def __init__(self):
    self._records = None
    self._lines = []

  def __call__(self, history):
    """The uint8 array of `history`'s records as JSON lines."""
    if history is not self._records or len(self._lines) > len(history):
      self._records, self._lines = history, []
    self._lines.extend(json.dumps(record).encode() + b'\n'
                       for record in history[len(self._lines):])
    return np.frombuffer(b''.join(self._lines), np.uint8)


def decode(array):
  """The records of a history array made by HistoryBytes."""
  return [json.loads(line) for line in np.asarray(array, np.uint8).tobytes().splitlines()]
