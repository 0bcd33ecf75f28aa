"""The sweep folder's index: which runs a sweep holds, and whether they finished before.

`index.json` records the sweep's config and runs; a rerun of the same sweep
skips the runs that finished under the same config and bindings.
"""
import json
import os
import re

INDEX_FILE = 'index.json'
# The index header's entries every run depends on (see finished_before).
RUN_KEYS = ('config_files', 'config_digest', 'extra_config')
# A gin binding 'name = value' (groups: name, value); a binding of several
# lines only matches its start.
BINDING = re.compile(r'\s*([\w./]+)\s*=\s*(.*?)\s*')


def write_index(output_dir, header, runs):
  """Rewrites index.json whole, through a rename, so a reader never sees half a file."""
  path = os.path.join(output_dir, INDEX_FILE)
  with open(path + '.tmp', 'w') as f:
    json.dump(dict(header, runs=runs), f, indent=2)
    f.write('\n')
  os.replace(path + '.tmp', path)


def canonical_bindings(bindings):
  """--config bindings as a set: the same for every order that cannot change the config.

  Bindings of different parameters commute, so they are sorted; of several
  bindings of one parameter gin applies the last, so only that one is kept.
  Anything but one 'name = value' line (an include, an import, several lines)
  can override what comes before it, so then the list stays as given.
  """
  last = {}
  for binding in bindings:
    m = BINDING.fullmatch(binding) if isinstance(binding, str) else None
    if m is None:
      return list(bindings)
    last[m.group(1)] = f'{m.group(1)} = {m.group(2)}'
  return [last[name] for name in sorted(last)]


def _run_keys(header):
  """The header's RUN_KEYS, its --config bindings as canonical_bindings."""
  keys = {k: header.get(k) for k in RUN_KEYS}
  if isinstance(keys['extra_config'], list):
    keys['extra_config'] = canonical_bindings(keys['extra_config'])
  return keys


def finished_before(output_dir, header, runs):
  """The folders of `runs` that an earlier invocation of the same sweep finished.

  Same runs: index.json's header has the same RUN_KEYS as `header` (config
  files, the parsed config's digest and the --config bindings, compared as
  canonical_bindings) and the run the same bindings and seed; seeds or grid
  points added since do not matter, nor does the backend. Such runs are
  skipped rather than started again (a finished rl.run would do nothing, but
  still costs a process start and a checkpoint restore each). Anything else
  (no index, another header, a run whose folder is gone) is run, and rl.run
  sorts out the rest.
  """
  try:
    with open(os.path.join(output_dir, INDEX_FILE)) as f:
      index = json.load(f)
  except (OSError, ValueError):
    return set()
  if not isinstance(index, dict) or _run_keys(index) != _run_keys(header):
    return set()
  wanted = {run['folder']: run for run in runs}
  done = set()
  for old in index.get('runs', []):
    run = wanted.get(old.get('folder'))
    if (run is not None and old.get('status') == 'finished'
        and old.get('bindings') == run['bindings'] and old.get('seed') == run['seed']
        and os.path.isdir(os.path.join(output_dir, run['folder']))):
      done.add(run['folder'])
  return done
