"""Tests for rl.learner.history: a learner's history as the bytes of its JSON lines."""

import numpy as np

from rl.learner import history as history_lib


def test_history_bytes_round_trip_as_the_list_grows_and_is_replaced():
  encode = history_lib.HistoryBytes()
  history = [{'epoch': 1, 'eval_return': None, 'loss': 0.1 + 0.2}]
  first = encode(history)
  assert first.dtype == np.uint8
  assert history_lib.decode(first) == history
  history.append({'epoch': 2, 'loss': 1e-310, 'name': 'é'})
  assert history_lib.decode(encode(history)) == history
  replaced = [{'epoch': 7}]
  assert history_lib.decode(encode(replaced)) == replaced
  assert history_lib.decode(encode([])) == []
  # An array read back from a checkpoint (a copy, any layout) decodes the same.
  assert history_lib.decode(np.array(encode(history))) == history


def test_history_bytes_encodes_each_record_once(monkeypatch):
  encode = history_lib.HistoryBytes()
  history = [{'epoch': i} for i in range(3)]
  encode(history)
  calls = []
  real = history_lib.json.dumps
  monkeypatch.setattr(history_lib.json, 'dumps', lambda r: calls.append(r) or real(r))
  history.append({'epoch': 3})
  assert history_lib.decode(encode(history)) == history
  assert calls == [{'epoch': 3}]
