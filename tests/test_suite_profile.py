"""benchmarks/suite_profile.py adds up its per-test records by file and in total."""
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
