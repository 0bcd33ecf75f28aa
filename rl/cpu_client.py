"""The process's CPU client: how its computations are dispatched, and on how many threads.

JAX creates the CPU client at the process's first computation and reads both
settings then, so a choice made after that changes nothing. The dispatch
changes no numbers. XLA splits large dot products and convolutions across its
threads, so the last bits of some configs' numbers depend on the thread count,
as they do on machines with different numbers of cores.
"""
import os

import jax

from rl.configurables import configurable
from rl.errors import ConfigError

# XLA's CPU client sizes its thread pool from this environment variable when
# it is created, and otherwise makes one thread per core the process may use.
THREADS_ENV = 'PJRT_NPROC'


def choose_dispatch(inline):
  """Makes the process's CPU computations run inline (`inline`) or on JAX's worker thread."""
  # A run on host envs calls its policy at every env step and reads the actions
  # at once: inline, a call skips the hand-off to the worker thread and back
  # (docs/performance.md). JAX-native runs dispatch their next epoch before they
  # read the current one's metrics, which needs asynchronous dispatch.
  jax.config.update('jax_cpu_enable_async_dispatch', not inline)


@configurable('cpu_threads')
def host_cores_setting(host_cores=0):
  """How many of the process's cores XLA's CPU threads leave to the runner's own thread.

  Args:
    host_cores: cores kept out of XLA's CPU thread pool, which keeps at least
      one thread. 0: XLA's own choice, a thread per core (convolutions over
      large batches gain from every core). 1: the runner books an epoch or
      steps host envs beside XLA's computing (small networks, small
      machines). Dot products are split across the threads, so the last bits
      of some configs' numbers depend on it. A PJRT_NPROC in the environment
      (XLA's own setting: the pool's threads) stands over it.
  """
  return host_cores


def available_cores():
  """The cores this process may run on."""
  try:
    return len(os.sched_getaffinity(0))
  except AttributeError:  # no affinity on macOS and Windows
    return os.cpu_count() or 1


def threads_for(host_cores, n_cores):
  """XLA's CPU threads: the process's `n_cores` but `host_cores` of them, at least one.

  The runner's own thread works all through an epoch (it books one epoch
  while the next runs, or steps host envs between policy calls). With a
  thread per core, XLA's threads and it take turns on a small machine, and
  XLA hands the microsecond kernels of small networks between its threads
  at a cost above their work; convolutions over large batches (MinAtar,
  Atari, several seeds at once) gain from every core (docs/performance.md).
  """
  if host_cores < 0:
    raise ConfigError(f'cpu_threads.host_cores must be 0 or more, got {host_cores}.')
  return max(1, n_cores - host_cores)


def configure(inline, host_cores):
  """Chooses the dispatch (`choose_dispatch`) and the threads (`choose_threads`), in that
  order: choosing the threads makes the client."""
  choose_dispatch(inline)
  return choose_threads(host_cores)


def choose_threads(host_cores):
  """Sizes XLA's CPU thread pool by `threads_for`, unless PJRT_NPROC is set already.

  A PJRT_NPROC of the user's stands. The variable is set only while the
  client is made here, so the run's child processes do not inherit it.
  Returns the threads XLA gets (None: the user's PJRT_NPROC decides).
  """
  if os.environ.get(THREADS_ENV):
    return None
  threads = threads_for(host_cores, available_cores())
  os.environ[THREADS_ENV] = str(threads)
  try:
    jax.devices()  # creates the clients, the CPU one reading the variable now
  finally:
    del os.environ[THREADS_ENV]
  return threads
