"""Where the test suite's CPU goes: each test file's own and child-process CPU, and JAX's compiles.

Runs the suite (`python -m pytest`, pytest.ini's options, plus any arguments
given) with this file loaded as a pytest plugin in both xdist workers. The
plugin records, for every test: its wall time, the CPU its worker spent
(user + system), the CPU of the processes it started and waited for, and JAX's
compile-pipeline events in the worker (tracing, lowering to MLIR, XLA compiling,
reads from the compilation cache), through `jax.monitoring`'s listeners. JAX
reports a program read from the cache as a compile too (its duration the read's),
so `compile` counts every program built and `cache_read` those of them read. Then
it prints the totals, the files by CPU, and the programs (by name) by the
seconds spent tracing, lowering and compiling them. Durations alone hide the processes'
CPU and count a worker's waits; both workers busy or not, the CPU is what a
2-core machine pays.

Usage: python benchmarks/suite_profile.py [--top 30] [--records FILE] [pytest arguments ...]
"""
import argparse
import collections
import glob
import json
import os
import resource
import subprocess
import sys
import tempfile
import time

import pytest

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT_VAR = 'RL_SUITE_PROFILE_DIR'
EVENTS = {'trace': '/jax/core/compile/jaxpr_trace_duration',
          'lower': '/jax/core/compile/jaxpr_to_mlir_module_duration',
          'compile': '/jax/core/compile/backend_compile_duration',
          'cache_read': '/jax/compilation_cache/cache_retrieval_time_sec'}

# The plugin: active only in a pytest process started by main() below.
_seconds = collections.Counter()
_counts = collections.Counter()
# Seconds by (program name, event), for the table of programs.
_by_program = collections.Counter()
_listening = []
_read_pending = [False]
_NAMES = {event: name for name, event in EVENTS.items()}


def _listen(event, duration, fun_name=None, **_):
  _seconds[event] += duration
  _counts[event] += 1
  name = _NAMES.get(event)
  if name == 'cache_read':
    # JAX names no program here; the compile event it ends next does.
    _read_pending[0] = True
  elif name:
    # Tracing names the function, lowering and compiling `jit(function)`.
    program = str(fun_name)
    program = program[4:-1] if program.startswith('jit(') else program
    _by_program[(program, name)] += duration
    _by_program[(program, 'n_' + name)] += 1
    if name == 'compile' and _read_pending[0]:
      _read_pending[0] = False
      _by_program[(program, 'n_cache_read')] += 1


def _cpu():
  own = resource.getrusage(resource.RUSAGE_SELF)
  children = resource.getrusage(resource.RUSAGE_CHILDREN)
  return own.ru_utime + own.ru_stime, children.ru_utime + children.ru_stime


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):  # pylint: disable=unused-argument
  """Records one test: its setup, call and teardown together."""
  if not _listening:
    import jax.monitoring  # pylint: disable=import-outside-toplevel
    jax.monitoring.register_event_duration_secs_listener(_listen)
    _listening.append(True)
  seconds, counts, by_program = dict(_seconds), dict(_counts), dict(_by_program)
  own, children = _cpu()
  start = time.perf_counter()
  yield
  wall = time.perf_counter() - start
  own_after, children_after = _cpu()
  record = dict(id=item.nodeid, wall=wall, own=own_after - own,
                children=children_after - children)
  for name, event in EVENTS.items():
    record[name] = _seconds[event] - seconds.get(event, 0.0)
    record[f'n_{name}'] = _counts[event] - counts.get(event, 0)
  programs = collections.defaultdict(dict)
  for (program, key), value in _by_program.items():
    if value != by_program.get((program, key), 0):
      programs[program][key] = value - by_program.get((program, key), 0)
  record['programs'] = programs
  worker = os.environ.get('PYTEST_XDIST_WORKER', 'main')
  with open(os.path.join(os.environ[OUT_VAR], f'{worker}.jsonl'), 'a', encoding='utf-8') as f:
    f.write(json.dumps(record) + '\n')


def summarize(records, top):
  """The totals and the `top` files by CPU, as printed lines."""
  total = collections.Counter()
  by_file = collections.defaultdict(collections.Counter)
  for record in records:
    path = record['id'].split('::')[0]
    for key, value in record.items():
      if key not in ('id', 'programs'):
        total[key] += value
        by_file[path][key] += value
    by_file[path]['tests'] += 1
  lines = [f"{len(records)} tests: CPU {total['own'] + total['children']:.0f} s "
           f"(workers {total['own']:.0f}, the processes tests start {total['children']:.0f}); "
           f"in the workers, JAX tracing {total['trace']:.0f} s, lowering {total['lower']:.0f} s, "
           f"XLA compiling {total['compile']:.0f} s for {total['n_compile']:.0f} programs, "
           f"{total['n_cache_read']:.0f} of them read from the compilation cache "
           f"({total['cache_read']:.0f} s)",
           '',
           '| file | tests | CPU s | workers | processes | trace | lower | compile or read '
           '| built |',
           '|---|---|---|---|---|---|---|---|---|']
  ranked = sorted(by_file.items(), key=lambda kv: -(kv[1]['own'] + kv[1]['children']))
  for path, t in ranked[:top]:
    lines.append(f"| {path} | {t['tests']} | {t['own'] + t['children']:.1f} | {t['own']:.1f} | "
                 f"{t['children']:.1f} | {t['trace']:.1f} | {t['lower']:.1f} | "
                 f"{t['compile']:.1f} | {t['n_compile']} |")
  return lines + [''] + summarize_programs(records, top)


def summarize_programs(records, top):
  """The `top` programs by the workers' seconds in tracing, lowering and compiling them.

  Programs are named as jit names them (the function's name), so one line may
  gather several programs of that name; `tests` counts the tests that built one.
  """
  total = collections.defaultdict(collections.Counter)
  for record in records:
    for program, seconds in record.get('programs', {}).items():
      total[program].update(seconds)
      total[program]['tests'] += 1
  def pipeline(t):
    return t['trace'] + t['lower'] + t['compile']
  lines = ['| program | tests | pipeline s | trace | lower | compile or read | built | read |',
           '|---|---|---|---|---|---|---|---|']
  for program, t in sorted(total.items(), key=lambda kv: -pipeline(kv[1]))[:top]:
    lines.append(f"| {program} | {t['tests']} | {pipeline(t):.1f} | {t['trace']:.1f} | "
                 f"{t['lower']:.1f} | {t['compile']:.1f} | {t['n_compile']} | "
                 f"{t['n_cache_read']} |")
  return lines


def main():
  parser = argparse.ArgumentParser(description=__doc__.split('\n', maxsplit=1)[0])
  parser.add_argument('--top', type=int, default=30, help='how many files to list')
  parser.add_argument('--records', help='also write every test\'s record here (JSON lines)')
  args, pytest_args = parser.parse_known_args()
  with tempfile.TemporaryDirectory(prefix='rl-suite-profile-') as out:
    env = dict(os.environ, **{OUT_VAR: out})
    here = os.path.dirname(os.path.abspath(__file__))
    env['PYTHONPATH'] = os.pathsep.join(filter(None, [here, env.get('PYTHONPATH')]))
    start = time.perf_counter()
    code = subprocess.call([sys.executable, '-m', 'pytest', '-p', 'suite_profile', '-q',
                            *pytest_args], cwd=REPO_ROOT, env=env)
    wall = time.perf_counter() - start
    records = []
    for path in sorted(glob.glob(os.path.join(out, '*.jsonl'))):
      with open(path, encoding='utf-8') as f:
        records.extend(json.loads(line) for line in f)
  if args.records:
    with open(args.records, 'w', encoding='utf-8') as f:
      f.writelines(json.dumps(record) + '\n' for record in records)
  print(f'\npytest: exit status {code}, {wall:.0f} s wall')
  print('\n'.join(summarize(records, args.top)))
  return code


if __name__ == '__main__':
  sys.exit(main())
