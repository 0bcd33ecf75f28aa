"""Where a sweep's runs execute: subprocesses on this machine, or tasks on a Ray cluster.

A backend takes jobs (the keyword arguments of processes.run_rl_logged: one
rl.run process, which runs one seed, or with `seeds` all the seeds of a
JAX-native grid point) and returns concurrent.futures.Futures of their error
lines (None = finished); launch.sweep does the scheduling, bookkeeping and
progress for both alike.
"""
import concurrent.futures
import socket
import subprocess
import threading
import time

from launch import processes
from launch.errors import SweepError

# How long `stop` lets a terminated rl.run finish its epoch and checkpoint it
# (rl.termination) before killing it.
STOP_GRACE_S = 60


class LocalBackend:
  """Runs each job as a `python -m rl.run` child process of this one."""

  name = 'local'
  in_flight = 'running'  # jobs submitted here start at once

  def __init__(self, parallel):
    # Threads only wait on the child processes, so the GIL costs nothing here.
    self._pool = concurrent.futures.ThreadPoolExecutor(max_workers=parallel)
    self._lock = threading.Lock()
    self._children = set()
    self._stopping = False

  def _started(self, process):
    with self._lock:
      self._children.add(process)
      stopping = self._stopping
    if stopping:  # started while `stop` ran: it missed this one
      process.terminate()

  def _run(self, job):
    mine = []

    def started(process):
      mine.append(process)
      self._started(process)

    try:
      return processes.run_rl_logged(**job, started=started)
    finally:
      with self._lock:
        self._children.difference_update(mine)

  def submit(self, job):
    return self._pool.submit(self._run, job)

  def stop(self):
    """Terminates every running rl.run, which finishes its epoch and checkpoints it, and waits
    for them (each resumes from its checkpoint on a rerun).

    One still running after STOP_GRACE_S, or when a second Ctrl-C or SIGTERM
    cuts the wait short, is killed and resumes from its last checkpoint.
    """
    with self._lock:
      self._stopping = True
      children = list(self._children)
    for process in children:
      process.terminate()
    deadline = time.monotonic() + STOP_GRACE_S
    try:
      for process in children:
        try:
          process.wait(max(deadline - time.monotonic(), 0))
        except subprocess.TimeoutExpired:
          process.kill()
    except KeyboardInterrupt:
      for process in children:
        process.kill()

  def close(self):
    self._pool.shutdown(wait=True, cancel_futures=True)


def _check_reachable(address):
  """Fails fast on a host:port nobody listens on; ray.init would retry for minutes."""
  if not address or address == 'auto':
    return  # Ray resolves these itself and fails at once if it finds no cluster
  host_port = address.split('://', 1)[-1]
  host, _, port = host_port.rpartition(':')
  if not host or not port.isdigit():
    raise SweepError(f"--ray_address '{address}' is not 'auto', 'host:port' or "
                     "'ray://host:port'.")
  try:
    socket.create_connection((host, int(port)), timeout=5).close()
  except OSError as e:
    raise SweepError(f"cannot reach a Ray cluster at '{address}' ({e.strerror or e}); start "
                     "one with 'ray start --head' or fix --ray_address.") from None


class RayBackend:
  """Runs each job as a Ray task that starts `python -m rl.run` on whichever node runs it.

  Every node needs this package (pip install '.[ray]') and must see the config
  files and the sweep's output folder at the same absolute paths (a shared
  filesystem): rl.run writes its checkpoints there, which is also what lets a
  rerun resume a run on another node.
  """

  name = 'ray'
  in_flight = 'submitted'  # Ray queues tasks until a node has the resources

  def __init__(self, address=None, num_cpus=1.0, num_gpus=0.0):
    try:
      import ray  # pylint: disable=import-outside-toplevel
    except ImportError:
      raise SweepError("--backend=ray needs Ray; install it with: pip install '.[ray]'") \
          from None
    if num_cpus <= 0 or num_gpus < 0:
      raise SweepError(f'--ray_num_cpus must be > 0 and --ray_num_gpus >= 0, not {num_cpus} '
                       f'and {num_gpus}.')
    _check_reachable(address)
    self._ray = ray
    try:
      # The runs' own output goes to their logs, so workers' prints stay there.
      ray.init(address=address, log_to_driver=False)
    except Exception as e:  # pylint: disable=broad-except  # Ray raises many kinds here
      message = ' '.join(str(e).split())[:300]
      raise SweepError(f'cannot start or join Ray at {address or "a local instance"}: '
                       f'{message}') from None
    resources = ray.cluster_resources()
    # A task that asks for more than any node has waits forever; say so now.
    if resources.get('CPU', 0) < num_cpus or resources.get('GPU', 0) < num_gpus:
      ray.shutdown()
      raise SweepError(f"the Ray cluster has {resources.get('CPU', 0):g} CPUs and "
                       f"{resources.get('GPU', 0):g} GPUs, less than one run asks for "
                       f'(--ray_num_cpus={num_cpus:g} --ray_num_gpus={num_gpus:g}).')
    self._task = ray.remote(num_cpus=num_cpus, num_gpus=num_gpus)(processes.run_rl_logged)
    self._refs = []

  def submit(self, job):
    ref = self._task.remote(**job)
    self._refs.append(ref)
    return ref.future()

  def stop(self):
    """Cancels the tasks; force kills their workers, whose rl.run dies with them."""
    for ref in self._refs:
      try:
        self._ray.cancel(ref, force=True)
      except Exception:  # pylint: disable=broad-except  # already finished
        pass

  def close(self):
    self._ray.shutdown()


def make_backend(name, parallel, ray_address=None, ray_num_cpus=1.0, ray_num_gpus=0.0):
  if name == 'local':
    return LocalBackend(parallel)
  if name == 'ray':
    return RayBackend(ray_address, ray_num_cpus, ray_num_gpus)
  raise SweepError(f"--backend must be 'local' or 'ray', not '{name}'.")
