"""`jit`: jax.jit with the compiler options every program of the runner is built with.

Every computation the runner compiles goes through `jit`, so a program's
numbers depend on the program alone: not on which entry point built it, nor
on XLA_FLAGS or on what else the process compiled before.

The one option, `xla_cpu_use_fusion_emitters=False`, has XLA's CPU backend
generate its fused kernels with its elemental IR emitters rather than its
newer MLIR fusion emitters. Both make kernels that run equally fast on these
programs (benchmarks/train_throughput.py: the same epoch and floor steps per
second either way), but the elemental ones compile about a third faster, and
a CartPole run spends more of its first minute compiling than training:
a2c_cartpole's training program compiles in about 2.0 s instead of 2.9 s,
and a whole run's programs in about 3.2 s instead of 4.4 s. The two emitters
order some fused reductions differently (the sum of squares of the gradient
norm, for one), so their results differ in the last bits and the option is
part of what a seed's numbers are. Other backends ignore it.

JAX takes compiler options only on a top-level jit, so the small jitted
helpers that also run inside the runner's programs (distributions' samplers,
the advantage estimators) keep plain `jax.jit`: inlined into a program, they
are compiled with its options.
"""
import jax

# Passed to every compilation (`jax.jit(..., compiler_options=...)`); they
# also enter the persistent compilation cache's keys.
COMPILER_OPTIONS = {'xla_cpu_use_fusion_emitters': False}


def jit(fun, **kwargs):
  """`jax.jit(fun, **kwargs)` compiled with COMPILER_OPTIONS."""
  return jax.jit(fun, compiler_options=COMPILER_OPTIONS, **kwargs)
