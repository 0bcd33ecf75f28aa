"""rl.compiler: every program a run compiles is built with the runner's compiler options.

A program compiled without them would compute slightly different numbers
(and compile slower), so a run's numbers would depend on which path built
it. The runs below are made one after the other in one fresh process with the
compilation cache off, so every program they need is compiled there and seen
by JAX's monitoring: in the run that first needs it.
"""
import json
import os
import subprocess
import sys

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from rl import compiler
from run_helpers import ROOT

# Records the names of the functions handed to compiler.jit (patched before
# any rl module that builds programs at import is imported) and of every
# program that rl's code compiles, then runs rl.run's main once for each
# argument (the arguments of one run, as JSON), printing what each run built
# and compiled. One process for all the runs: each new one costs seconds of
# JAX import.
PROBE = """
import functools, json, os, sys, traceback
import gin
from jax import monitoring
from rl import compiler

built, compiled = set(), set()
plain_jit = compiler.jit

def name_of(fun):
  while isinstance(fun, functools.partial):
    fun = fun.func
  return getattr(fun, '__name__', repr(fun))

def recording_jit(fun, **kwargs):
  built.add(f'jit({name_of(fun)})')
  return plain_jit(fun, **kwargs)

RL = os.path.join(sys.argv.pop(1), 'rl') + os.sep

def from_rl():
  # Whether the innermost caller outside jax is rl's code (not gymnax's own
  # eager arithmetic, say, which no option of ours reaches).
  for frame in reversed(traceback.extract_stack()[:-2]):
    if os.sep + 'jax' in frame.filename or frame.filename.startswith('<'):
      continue
    return frame.filename.startswith(RL)
  return False

def on_event(event, duration, fun_name=None, **kwargs):
  if event.endswith('backend_compile_duration') and from_rl():
    compiled.add(fun_name)

compiler.jit = recording_jit
monitoring.register_event_duration_secs_listener(on_event)

from absl import app, flags
from rl import run
for name, args in json.loads(sys.argv[1]).items():
  # `built` is kept: functions compiler.jit made at import (in the first run) serve every run.
  compiled.clear()
  gin.clear_config()
  flags.FLAGS.unparse_flags()  # each run parses its own flags from their defaults
  sys.argv = ['rl.run'] + args
  try:
    app.run(run.main, flags_parser=run.flags_parser('rl.run'))
  except SystemExit as e:
    assert not e.code, (name, e.code)
  print(name, 'COMPILED', json.dumps(sorted(compiled)))
  print(name, 'WITHOUT', json.dumps(sorted(compiled - built)))
"""

RUNS = {
    'ppo': ('ppo_cartpole.gin', ['PPO.n_eval_episodes = 2', 'PPO.eval_every = 1']),
    'dqn': ('dqn_cartpole.gin', ['RLTask.initial_trajectories = 2', 'DQN.n_eval_episodes = 2']),
    'ppo_jax': ('ppo_cartpole_jax.gin', []),
}


def test_every_program_of_a_run_is_built_with_the_compiler_options(tmp_path):
  runs = {}
  for name, (config, bindings) in RUNS.items():
    runs[name] = [f'--config_file={ROOT}/configs/{config}', f'--output_dir={tmp_path}/{name}',
                  '--compilation_cache_dir=off',
                  *(f'--config={b}' for b in ['train_rl.n_epochs = 2'] + bindings)]
  result = subprocess.run([sys.executable, '-c', PROBE, ROOT, json.dumps(runs)], cwd=ROOT,
                          capture_output=True, text=True, timeout=600,
                          env=dict(os.environ, PYTHONPATH=ROOT))
  assert result.returncode == 0, result.stderr[-3000:]
  seen = {}
  for line in result.stdout.splitlines():
    parts = line.split(' ', 2)
    if len(parts) == 3 and parts[0] in RUNS and parts[1] in ('COMPILED', 'WITHOUT'):
      seen[parts[0], parts[1]] = json.loads(parts[2])
  for name in RUNS:
    # The probe saw each run's programs (the epoch's among them) ...
    assert sum(n.count('jit(') for n in seen[name, 'COMPILED']) >= 3, (name, seen)
    # ... and every one of them was built by compiler.jit.
    assert seen[name, 'WITHOUT'] == [], (name, seen[name, 'WITHOUT'])


def test_xla_accepts_the_options_and_they_keep_a_program_s_results():
  # An XLA that does not know an option refuses to compile; this says so
  # by name rather than through every run failing.
  def f(x, w):
    h = jnp.tanh(x @ w)
    return jnp.mean(h ** 2), jax.nn.log_softmax(h)
  x = np.random.RandomState(0).randn(64, 8).astype(np.float32)
  w = np.random.RandomState(1).randn(8, 8).astype(np.float32)
  got = compiler.jit(f)(x, w)
  want = f(x, w)
  for g, e in zip(got, want):
    np.testing.assert_allclose(g, e, rtol=1e-5, atol=1e-6)


def test_configure_switches_the_options_of_functions_already_made():
  f = compiler.jit(lambda x: jnp.sum(jnp.tanh(x) ** 2))
  x = np.linspace(-2, 2, 256, dtype=np.float32)
  assert compiler.options() == compiler.FAST_COMPILE_OPTIONS
  fast_compile = f.current()
  try:
    compiler.configure(fast_compile=False)
    assert compiler.options() == compiler.FAST_RUN_OPTIONS
    fast_run = f.current()
    assert fast_run is not fast_compile
    np.testing.assert_allclose(f(x), fast_compile(x), rtol=1e-5)
  finally:
    compiler.configure()
  assert f.current() is fast_compile


def test_a_run_compiles_with_the_options_its_config_binds(tmp_path):
  from rl import experiment as run  # pylint: disable=import-outside-toplevel
  config = f'{ROOT}/configs/ppo_cartpole.gin'
  try:
    for binding, expected in (('compiler.fast_compile = False', compiler.FAST_RUN_OPTIONS),
                              ('compiler.fast_compile = True', compiler.FAST_COMPILE_OPTIONS)):
      with run.prepared_run([config], [binding, 'train_rl.n_epochs = 0'],
                            str(tmp_path / binding[-5:].strip())) as prepared:
        assert compiler.options() == expected
        prepared.save()
    # A resume with the binding changed is a changed config, refused.
    with pytest.raises(run.OutputDirError, match='different config'):
      with run.prepared_run([config], ['compiler.fast_compile = True', 'train_rl.n_epochs = 0'],
                            str(tmp_path / 'False')):
        pass
  finally:
    compiler.configure()


def test_unset_the_runs_length_chooses_the_kernels():
  try:
    # JAX-native envs from 100,000 env steps a seed, host envs from 1,000,000; unknown: short.
    for env_steps, jax_native, fast in ((99_999, True, True), (100_000, True, False),
                                        (999_999, False, True), (1_000_000, False, False),
                                        (None, True, True)):
      assert compiler.configure(env_steps=env_steps, jax_native=jax_native) is fast
      assert compiler.fast_compile() is fast and compiler.chosen_by_length()
      assert compiler.options() == (compiler.FAST_COMPILE_OPTIONS if fast
                                    else compiler.FAST_RUN_OPTIONS)
    # A binding stands over the length.
    assert compiler.configure(fast_compile=True, env_steps=10 ** 7, jax_native=True) is True
    assert not compiler.chosen_by_length()
  finally:
    compiler.configure()


def test_a_run_extended_past_the_length_that_chose_keeps_its_kernels(tmp_path):
  from rl import experiment as run  # pylint: disable=import-outside-toplevel
  from run_helpers import PPO_JAX  # pylint: disable=import-outside-toplevel
  # ppo_cartpole_jax: 256 env steps an epoch, so 391 epochs are 100,096 env steps.
  try:
    with run.prepared_run([PPO_JAX], ['train_rl.n_epochs = 0'], str(tmp_path / 'run')) as prepared:
      assert compiler.options() == compiler.FAST_COMPILE_OPTIONS
      prepared.save()
    with run.prepared_run([PPO_JAX], ['train_rl.n_epochs = 391'], str(tmp_path / 'long')):
      assert compiler.options() == compiler.FAST_RUN_OPTIONS
    # The short run resumed with the long run's epochs compiles as it started.
    with run.prepared_run([PPO_JAX], ['train_rl.n_epochs = 391'], str(tmp_path / 'run')):
      assert compiler.options() == compiler.FAST_COMPILE_OPTIONS
  finally:
    compiler.configure()
