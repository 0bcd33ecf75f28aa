"""Inline or asynchronous dispatch of the process's CPU computations."""
import jax


def choose(inline):
  """Makes the process's CPU computations run inline (`inline`) or on JAX's worker thread.

  JAX reads the setting when the process's first computation creates its CPU
  client, so a call after that changes nothing. Numbers do not depend on it.
  """
  # A run on host envs calls its policy at every env step and reads the actions
  # at once: inline, a call skips the hand-off to the worker thread and back
  # (docs/performance.md). JAX-native runs dispatch their next epoch before they
  # read the current one's metrics, which needs asynchronous dispatch.
  jax.config.update('jax_cpu_enable_async_dispatch', not inline)
