"""`jit`: jax.jit with the XLA options every program of the runner is compiled with.

Every program the runner compiles goes through `jit`, so a run's numbers
depend on its config alone, not on which code path built a program.
`compiler.fast_compile` (gin) picks XLA's elemental CPU emitters, which
compile faster and run slower than its fusion emitters; left unset, the run's
length picks: long runs compile with the fusion emitters, short ones with the
elemental ones (docs/performance.md). The emitters round some fused
reductions differently, so the choice is part of what a seed's numbers are,
and a resumed run keeps the one it started with.

JAX takes compiler options only on a top-level jit: small helpers that also
run inside the runner's programs keep plain `jax.jit` and, inlined, take the
program's options.
"""
import jax

from rl.configurables import configurable

# The options of each choice of `configure`; they are passed to every
# compilation (`jax.jit(..., compiler_options=...)`) and so also enter the
# persistent compilation cache's keys.
# Both choices name the emitters, so XLA_FLAGS in the environment (the test
# suite compiles its own small programs with the elemental emitters) cannot
# change what a config's programs compile to.
FAST_COMPILE_OPTIONS = {'xla_cpu_use_fusion_emitters': False}
FAST_RUN_OPTIONS = {'xla_cpu_use_fusion_emitters': True}

# The options programs are compiled with now (set by `configure`), and the
# same as a hashable key, made once here rather than at every call of the
# acting functions.
_options = dict(FAST_COMPILE_OPTIONS)
_options_key = tuple(sorted(_options.items()))


# With compiler.fast_compile unset, a run of at least this many env steps a seed compiles
# with the fusion emitters, by whether its envs are JAX-native. A JAX-native epoch is one
# program, which they speed up enough to pay for their extra compiling within some 50,000
# env steps; on host envs stepping the envs takes most of an epoch, and the shipped
# classic-control configs (up to 500,000 env steps) keep the elemental emitters their
# recorded results were made with (docs/performance.md).
LONG_RUN_ENV_STEPS = {True: 100_000, False: 1_000_000}

# Whether the options were chosen from the run's length (compiler.fast_compile unset).
_chosen_by_length = True


@configurable('compiler', denylist=['env_steps', 'jax_native'])
def configure(fast_compile=None, env_steps=None, jax_native=False):
  """Sets the options every program made by `jit` compiles with from now on.

  Args:
    fast_compile: True: XLA's elemental CPU emitters (programs compile
      faster, run slower: short runs); False: its fusion emitters (long
      runs); None: chosen from the run's length, False for a run of at least
      LONG_RUN_ENV_STEPS env steps a seed (100,000 on JAX-native envs,
      1,000,000 on host envs), else True.
    env_steps: the run's env steps a seed (None: not known, a short run).
    jax_native: whether the run's envs are JAX-native.

  Returns:
    The choice made (fast_compile as a bool).
  """
  global _chosen_by_length  # pylint: disable=global-statement
  _chosen_by_length = fast_compile is None
  if fast_compile is None:
    fast_compile = env_steps is None or env_steps < LONG_RUN_ENV_STEPS[bool(jax_native)]
  use(fast_compile)
  return bool(fast_compile)


def use(fast_compile):
  """Compiles with the elemental (True) or the fusion (False) emitters from now on."""
  global _options, _options_key  # pylint: disable=global-statement
  _options = dict(FAST_COMPILE_OPTIONS if fast_compile else FAST_RUN_OPTIONS)
  _options_key = tuple(sorted(_options.items()))


def fast_compile():
  """Whether programs compile with the elemental emitters now."""
  return _options == FAST_COMPILE_OPTIONS


def chosen_by_length():
  """Whether the last `configure` chose from the run's length (compiler.fast_compile unset)."""
  return _chosen_by_length


def options():
  """The compiler options programs are compiled with now (a copy)."""
  return dict(_options)


class _Jitted:
  """`jax.jit(fun, **kwargs)` under the current options: one jitted function per set of options.

  The options are looked up at every call, so functions made at import (the
  key makers) and several runs in one process (tests, sweeps) follow
  `configure`.
  """

  def __init__(self, fun, kwargs):
    self._fun = fun
    self._kwargs = kwargs
    self._by_options = {}

  def current(self):
    """The jax.jit function of the current options."""
    jitted = self._by_options.get(_options_key)
    if jitted is None:
      jitted = self._by_options[_options_key] = jax.jit(
          self._fun, compiler_options=dict(_options), **self._kwargs)
    return jitted

  def __call__(self, *args, **kwargs):
    return self.current()(*args, **kwargs)

  def __getattr__(self, name):  # lower, eval_shape, trace, ...
    if name.startswith('_'):
      raise AttributeError(name)
    return getattr(self.current(), name)


def jit(fun, **kwargs):
  """`jax.jit(fun, **kwargs)`, compiled with the options `configure` set when called."""
  return _Jitted(fun, kwargs)

