"""Whether JAX runs a process's CPU computations inline or on a worker thread.

By default JAX's CPU client dispatches asynchronously: a call enqueues its
computation on a worker thread and returns futures at once. That pays off
when the caller has other work to do before it reads the results, as the
JAX-native backend does: it dispatches its next epoch before it reads and
writes the current one's metrics (rl.learner.base).

A run whose envs step on the host (gymnasium) has nothing to overlap: every
env step calls one small compiled function, the policy, and reads its actions
at once. There the hand-off to the worker thread and back is most of the
call: a jitted 128x128 MLP policy on a batch of 4 observations, results read
back, took 90 to 110 us a call dispatched asynchronously and 33 to 35 us
inline, on 2 cores. A CartPole run makes about 5,000 such calls (collection
and greedy evaluation), and it trains its epoch in one call whose results it
reads straight away, so inline dispatch costs it nothing elsewhere.

The CPU client reads the setting once, when it is created by the process's
first computation; `choose` therefore only takes effect before that, and
later calls leave the process as it is. Numbers do not depend on it.
"""
import jax
# Private: jax has no public way to ask whether its clients exist yet (the
# public jax.extend.backend.backends() would create them).
from jax._src import xla_bridge

FLAG = 'jax_cpu_enable_async_dispatch'


def choose(inline):
  """Makes the process's CPU computations run inline (`inline`) or asynchronously.

  Returns whether the choice took effect: False once the CPU client exists
  (a process that already computed something keeps its dispatch).
  """
  if xla_bridge.backends_are_initialized():
    return False
  jax.config.update(FLAG, not inline)
  return True


def is_inline():
  """Whether the setting the CPU client is (or will be) created with runs computations inline."""
  return not jax.config.values[FLAG]
