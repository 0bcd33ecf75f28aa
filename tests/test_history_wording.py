"""The repository speaks of the present: no tracked text says what was before (git log keeps that)."""
import os
import re
import subprocess

import pytest

from run_helpers import ROOT

FOLDERS = ['README.md', 'docs', 'rl', 'launch', 'benchmarks', 'configs', 'tests']
TEXT = ('.md', '.py', '.gin', '.yaml', '.yml', '.txt', '.cff', '.toml', '.ini', '.cfg')
HISTORY = re.compile(r'this stop|previous stop|last stop|was \d.*before|no longer|used to be'
                     r'|previous session|before the change|had needed|measured (anew|again)'
                     r'|streams before|earlier streams|not run again', re.IGNORECASE)


def tracked_text_files():
  """The tracked text files under FOLDERS, relative to the repository root."""
  try:
    listed = subprocess.run(['git', 'ls-files', '--', *FOLDERS], cwd=ROOT, check=True,
                            capture_output=True, text=True).stdout.splitlines()
  except (OSError, subprocess.CalledProcessError):
    pytest.skip('not a git checkout')
  this = os.path.relpath(os.path.abspath(__file__), ROOT)
  return [path for path in listed if path.endswith(TEXT) and path != this]


def history_lines(path):
  """'path:line: text' for each line of `path` that matches HISTORY."""
  with open(os.path.join(ROOT, path), encoding='utf-8') as f:
    return [f'{path}:{number}: {line.strip()}' for number, line in enumerate(f, 1)
            if HISTORY.search(line)]


def test_the_pattern_finds_each_phrase_and_passes_present_tense():
  for phrase in ['As of this stop', 'the Previous Stop', 'at the last stop', 'it was 2.3 s before',
                 'is no longer needed', 'it used to be slow', 'in the previous session',
                 'before the change it took 3 s', 'where it had needed 10,240',
                 'measured anew', 'from the earlier streams']:
    assert HISTORY.search(phrase), phrase
  for phrase in ['stops at the first eval', 'the previous epoch', 'was stopped at 475,000',
                 'runs before the first epoch', 'a longer run']:
    assert not HISTORY.search(phrase), phrase


def test_no_tracked_text_has_history_wording():
  files = tracked_text_files()
  assert 'README.md' in files and any(path.startswith('rl/') for path in files)
  hits = [hit for path in files for hit in history_lines(path)]
  assert not hits, 'history wording (say what is, with the command that measures it):\n' + \
      '\n'.join(hits)
