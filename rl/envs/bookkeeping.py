"""What both task backends (rl.envs.gym_task, rl.envs.jax_task) keep and check alike.

The one build of a task's storage from the trainer's TaskNeeds, and the
collection counters a task's checkpoint holds.
"""
from rl.errors import ConfigError

# What a task has collected so far; logged with every epoch and checkpointed.
COUNTERS = ('n_interactions', 'n_trajectories', 'n_episodes')


def checked_needs(task, needs):
  """`needs` (an rl.envs.task.TaskNeeds) for `task.build_storage`, checked.

  Raises RuntimeError on a second build: the storage is sized from the
  needs once, before anything is collected or restored into it.
  """
  if task.needs is not None:
    raise RuntimeError(f'{type(task).__name__}.build_storage is called once; the storage '
                       f'was built already for {task.needs}')
  if int(needs.n_replay_epochs) < 1:
    raise ConfigError(f"n_replay_epochs must be >= 1, got {needs.n_replay_epochs}; fix the "
                      "trainer's n_replay_epochs binding.")
  if int(needs.dist_inputs_size) < 1 or int(needs.reserved_rows) < 0:
    raise ValueError(f'dist_inputs_size must be >= 1 and reserved_rows >= 0: {needs}')
  return needs


def counters(task):
  """The task's COUNTERS as a dict (for its checkpoint's metadata)."""
  return {name: getattr(task, name) for name in COUNTERS}


def load_counters(task, meta):
  """Sets the task's COUNTERS from its checkpoint's metadata."""
  for name in COUNTERS:
    setattr(task, name, meta[name])
