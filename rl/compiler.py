"""`jit`: jax.jit with the compiler options every program of the runner is built with.

Every computation the runner compiles goes through `jit`, so a program's
numbers depend on the program alone: not on which entry point built it, nor
on XLA_FLAGS or on what else the process compiled before.

Which kernels: `compiler.fast_compile` (gin; True by default) has XLA's CPU
backend generate its fused kernels with its elemental IR emitters
(`xla_cpu_use_fusion_emitters=False`) rather than its newer MLIR fusion
emitters. The elemental ones compile about a third faster and run slower:
  * compile: a2c_cartpole's training program in about 2.0 s instead of
    2.9 s, and a whole run's programs in about 3.2 s instead of 4.4 s;
  * run: PPO's CartPole epoch 11% slower and DQN's 13%; over
    ppo_cartpole's whole 100k-step budget, training 6-10% and collection
    and evaluation 15-20% slower; ppo_halfcheetah's epoch trains 20% and
    collects 14% slower.
A CartPole run solved in thirty epochs spends more of its time compiling
than training, so the classic-control configs keep the default; a run of
minutes or hours (MuJoCo, Atari, MinAtar, LunarLander) wins back the extra
second of compiling many times over, and its config sets
`compiler.fast_compile = False`. The two emitters order some fused
reductions differently (the sum of squares of the gradient norm, for one),
so their results differ in the last bits: the binding is part of what a
seed's numbers are, is recorded in the run's config, and a resume with it
changed is refused like any other changed binding. Other backends ignore
the option.

The same choice says whether the matrix products XLA hands to Eigen run on
XLA's thread pool (`xla_cpu_multi_thread_eigen`). The short runs' networks
are small (64x64): a weight gradient of a 256-row batch is a product of a
few dozen microseconds, which the hand-offs to and from the pool slow down
rather than speed up. With fast_compile they run on the calling thread:
PPO's CartPole epoch 3-4% faster, DQN's 3%, A2C's 4%, PPOJoint's 1%,
with the same bits on every classic-control config. The long runs' configs
keep the pool, for the larger products of their networks on machines with
more cores (on 2 cores MinAtar's and HalfCheetah's epochs ran the same either
way).

The binding takes effect when the runner calls `configure` (after parsing
the config, before building anything). A function made by `jit` looks the
options up at every call and keeps one compiled function per set of
options, so the programs made at import (the key makers) follow it too,
and several runs in one process (tests, sweeps) each get their own.

JAX takes compiler options only on a top-level jit, so the small jitted
helpers that also run inside the runner's programs (distributions' samplers,
the advantage estimators) keep plain `jax.jit`: inlined into a program, they
are compiled with its options.
"""
import gin
import jax

# The options of each choice of `configure`; they are passed to every
# compilation (`jax.jit(..., compiler_options=...)`) and so also enter the
# persistent compilation cache's keys.
FAST_COMPILE_OPTIONS = {'xla_cpu_use_fusion_emitters': False,
                        'xla_cpu_multi_thread_eigen': False}
FAST_RUN_OPTIONS = {}

# The options programs are compiled with now (set by `configure`), and the
# same as a hashable key, made once here rather than at every call of the
# acting functions.
_options = dict(FAST_COMPILE_OPTIONS)
_options_key = tuple(sorted(_options.items()))


@gin.configurable('compiler')
def configure(fast_compile=True):
  """Sets the options every program made by `jit` compiles with from now on.

  Args:
    fast_compile: True: XLA's elemental CPU emitters, whose programs compile
      about a third faster and run 10-20% slower, and Eigen's products on
      the calling thread (short runs of small networks: the
      classic-control configs); False: its fusion emitters and threaded
      products (long runs). See the module doc for the figures.
  """
  global _options, _options_key  # pylint: disable=global-statement
  _options = dict(FAST_COMPILE_OPTIONS if fast_compile else FAST_RUN_OPTIONS)
  _options_key = tuple(sorted(_options.items()))


def options():
  """The compiler options programs are compiled with now (a copy)."""
  return dict(_options)


class _Jitted:
  """`jax.jit(fun, **kwargs)` under the current options: one jitted function per set of options."""

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

