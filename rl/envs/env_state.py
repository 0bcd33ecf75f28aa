"""Saving and restoring the state of gymnasium sub-envs, for an exact resume."""
import io
import pickle
import sys

import numpy as np
from gymnasium.utils import EzPickle


def dump_env_state(vector_env):
  """Pickles the sub-envs (physics state and their RNGs) for an exact resume.

  Returns None for envs whose state cannot be saved (e.g. Box2D's); the
  caller then resets them on resume, which is correct but not bit-exact.
  """
  buffer = io.BytesIO()
  try:
    _EnvPickler(buffer, pickle.HIGHEST_PROTOCOL).dump(vector_env.envs)
  except Exception:  # pylint: disable=broad-except
    return None
  return buffer.getvalue()


def load_env_state(vector_env, blob):
  vector_env.envs = pickle.loads(blob)


class _EnvPickler(pickle.Pickler):
  """Pickles envs with their state, also those whose own pickling would drop it.

  gymnasium's EzPickle envs (ALE, MuJoCo, Box2D) pickle only their constructor
  arguments: unpickled, they are new envs at the start of a game, and a resume
  from them would join the running episode to another one without a word.
  Those whose simulator can save its state (ALE, MuJoCo) are pickled as their
  constructor arguments plus that state; the others (Box2D) cannot be saved.
  """

  def reducer_override(self, obj):
    if not isinstance(obj, EzPickle):
      return NotImplemented
    saver = _simulator_saver(obj)
    if saver is None:
      raise pickle.PicklingError(f'cannot save the state of {type(obj).__name__}')
    save, restore = saver
    env_state = {name: getattr(obj, name) for name in _ENV_ATTRIBUTES if hasattr(obj, name)}
    # EzPickle's own record of the constructor's arguments.
    args, kwargs = obj._ezpickle_args, obj._ezpickle_kwargs  # pylint: disable=protected-access
    return _rebuild_env, (type(obj), args, kwargs, env_state, restore, save(obj))


# gymnasium.Env's own state: its generator (no-op starts, MuJoCo's reset noise)
# and what gymnasium.make set on it.
_ENV_ATTRIBUTES = ('_np_random', '_np_random_seed', 'spec')


def _simulator_saver(env):
  """(save, restore) of an EzPickle env's simulator state, or None where we cannot save it."""
  if hasattr(getattr(env, 'ale', None), 'cloneState'):
    return _save_ale, _restore_ale
  mujoco = sys.modules.get('mujoco')
  if mujoco is not None and isinstance(getattr(env, 'model', None), mujoco.MjModel):
    return _save_mujoco, _restore_mujoco
  return None


def _rebuild_env(cls, args, kwargs, env_state, restore, simulator_state):
  env = cls(*args, **kwargs)
  for name, value in env_state.items():
    setattr(env, name, value)
  restore(env, simulator_state)
  return env


def _save_ale(env):
  # With the RNG: sticky actions draw from it.
  return env.ale.cloneState(include_rng=True)


def _restore_ale(env, state):
  env.ale.restoreState(state)


def _save_mujoco(env):
  import mujoco  # pylint: disable=import-outside-toplevel
  # Everything mj_step reads, the solver's warm start included: the positions
  # and velocities alone give other numbers a few steps on.
  spec = mujoco.mjtState.mjSTATE_INTEGRATION
  state = np.empty(mujoco.mj_stateSize(env.model, spec))
  mujoco.mj_getState(env.model, env.data, state, spec)
  return state


def _restore_mujoco(env, state):
  import mujoco  # pylint: disable=import-outside-toplevel
  mujoco.mj_setState(env.model, env.data, state, mujoco.mjtState.mjSTATE_INTEGRATION)
