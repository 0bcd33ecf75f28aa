"""benchmarks/suite_profile.py adds up its per-test records by file, by program and in total."""
# pylint: disable=protected-access
import benchmark_scripts

suite_profile = benchmark_scripts.load('suite_profile')


def record(nodeid, own, children, compile_seconds, n_compile):
  zero = {name: 0.0 for name in suite_profile.EVENTS}
  zero.update({f'n_{name}': 0 for name in suite_profile.EVENTS})
  return dict(zero, id=nodeid, wall=own, own=own, children=children, compile=compile_seconds,
              n_compile=n_compile)


def test_files_rank_by_their_tests_cpu_workers_and_processes_together():
  lines = suite_profile.summarize([
      record('tests/test_a.py::one', 1.0, 0.0, 0.5, 2),
      record('tests/test_b.py::one', 0.5, 2.0, 0.0, 0),
      record('tests/test_a.py::two', 1.0, 0.0, 0.25, 1)], top=5)
  assert lines[0].startswith('3 tests: CPU 4 s (workers 2, the processes tests start 2)')
  assert 'XLA compiling 1 s for 3 programs, 0 of them read' in lines[0]
  rows = [line for line in lines if line.startswith('| tests/')]
  assert rows == ['| tests/test_b.py | 1 | 2.5 | 0.5 | 2.0 | 0.0 | 0.0 | 0.0 | 0 |',
                  '| tests/test_a.py | 2 | 2.0 | 2.0 | 0.0 | 0.0 | 0.0 | 0.8 | 3 |']


def test_compile_events_add_up_by_program_and_a_cache_read_counts_for_the_compile_it_ends():
  suite_profile._by_program.clear()
  events = suite_profile.EVENTS
  suite_profile._listen(events['trace'], 0.5, fun_name='_train')
  suite_profile._listen(events['compile'], 2.0, fun_name='jit(_train)')
  suite_profile._listen(events['cache_read'], 0.1)
  suite_profile._listen(events['compile'], 0.25, fun_name='jit(_train)')
  suite_profile._listen(events['compile'], 1.0, fun_name='jit(act)')
  programs = dict(suite_profile._by_program)
  suite_profile._by_program.clear()
  assert programs == {('_train', 'trace'): 0.5, ('_train', 'n_trace'): 1,
                      ('_train', 'compile'): 2.25, ('_train', 'n_compile'): 2,
                      ('_train', 'n_cache_read'): 1,
                      ('act', 'compile'): 1.0, ('act', 'n_compile'): 1}


def test_programs_rank_by_their_seconds_of_tracing_lowering_and_compiling():
  one = record('tests/test_a.py::one', 1.0, 0.0, 0.0, 0)
  one['programs'] = {'_train': {'trace': 1.0, 'compile': 2.0, 'n_compile': 1},
                     'act': {'compile': 0.5, 'n_compile': 2, 'n_cache_read': 1}}
  two = record('tests/test_a.py::two', 1.0, 0.0, 0.0, 0)
  two['programs'] = {'act': {'lower': 3.0, 'compile': 0.5, 'n_compile': 1}}
  rows = [line for line in suite_profile.summarize_programs([one, two], top=5)
          if line.startswith('| ') and not line.startswith('| program')]
  assert rows == ['| act | 2 | 4.0 | 0.0 | 3.0 | 1.0 | 3 | 1 |',
                  '| _train | 1 | 3.0 | 1.0 | 0.0 | 2.0 | 1 | 0 |']
