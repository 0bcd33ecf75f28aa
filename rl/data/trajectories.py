"""The trajectories a gymnasium task stores: the running segments, the epochs kept, their slices.

Data layout. A stored trajectory of T steps occupies T + 1 consecutive *rows*:
rows 0..T-1 are its steps (observation at the start of the step, action,
reward, dist_inputs of the acting policy, discounted return, done, mask=1), and
row T holds the final observation with mask=0 and zeros elsewhere. `done` is
gymnasium's `terminated` only: a time-limit truncation or a cut at `max_steps`
leaves done=0 so that value-based estimators bootstrap from the final
observation's value (the episode goes on in the world, only our record of it
stops; treating it as an end would teach the value net that the state is
worth nothing more). All trajectories of an epoch live in flat numpy arrays
with `traj_start` offsets, so slices of many trajectories are gathered with
one fancy-indexing operation per field.

Stacked observations (num_stacked_frames > 1) are stored one frame per row,
plus a few context frames per trajectory (rl.data.frames), and rebuilt on the
device whenever rows are gathered (rl.data.slices): a step of 84x84x4 Atari
observations costs one 84x84 frame, not four.

The task's collect loop (rl.envs.gym_task) steps the envs and decides where
segments end; `Trajectories` writes each step into the running segments,
turns an ended segment into a trajectory and keeps the latest epochs.
"""
import collections

import jax
import numpy as np

from rl.data import frames as frames_lib
from rl.data import replay_ring
from rl.data import slices

# The fields of a batch of slices, each shaped [B, L, ...].
Batch = collections.namedtuple(
    'Batch', ['observation', 'action', 'reward', 'done', 'mask', 'dist_inputs', 'return_'])

ROW_FIELDS = Batch._fields

# Rows per env the running segments start with. They grow when a segment
# gets longer: an episode cap can be tens of thousands of steps that few
# segments reach, and preallocating it for every env would cost gigabytes of
# Atari frames. Every shipped config's cap fits, so their buffers never grow.
INITIAL_SEGMENT_ROWS = 1024


def discounted_returns(rewards, dones, gamma):
  """Backwards discounted returns of one 1-D trajectory, restarting after dones.

  G_t = r_t + gamma * (1 - d_t) * G_{t+1}, with nothing after the last step
  (no bootstrap). Numpy, because the task computes it while storing data.
  """
  rewards = np.asarray(rewards)
  dones = np.asarray(dones)
  if rewards.ndim != 1 or rewards.shape != dones.shape:
    raise ValueError(
        "rewards and dones must be 1-D arrays of equal length; got shapes "
        f"{rewards.shape} and {dones.shape}.")
  out_dtype = np.result_type(rewards.dtype, np.float32)
  # A plain-float loop over Python lists: numpy scalar indexing costs ~8x
  # more per row, and this runs once per finished episode inside collection.
  reward_list = rewards.tolist()
  continue_list = (1.0 - dones.astype(np.float64)).tolist()
  out = [0.0] * len(reward_list)
  running = 0.0
  for t in range(len(reward_list) - 1, -1, -1):
    running = reward_list[t] + gamma * continue_list[t] * running
    out[t] = running
  return np.asarray(out, dtype=out_dtype)


class EpochData:
  """The trajectories of one epoch, as flat row arrays plus offsets.

  With stacked observations stored as frames (rl.data.frames), rows['observation']
  holds each row's newest frame, `context` [K, *frame] the trajectories'
  context frames in trajectory order and `traj_context` [n] how many of
  them each trajectory has; without stacking both are None.
  """

  def __init__(self, rows, traj_start, traj_rows, context=None, traj_context=None):
    self.rows = rows  # dict field -> [R, ...]
    self.traj_start = traj_start  # [n] first row of each trajectory
    self.traj_rows = traj_rows  # [n] rows of each trajectory (steps + 1)
    self.context = context
    self.traj_context = traj_context

  @property
  def n_trajectories(self):
    return len(self.traj_start)

  @property
  def n_steps(self):
    return int(self.rows['mask'].sum())

  @classmethod
  def concatenate(cls, parts):
    if len(parts) == 1:
      return parts[0]
    offsets = np.cumsum([0] + [len(p.rows['mask']) for p in parts[:-1]])
    rows = {f: np.concatenate([p.rows[f] for p in parts]) for f in ROW_FIELDS}
    starts = np.concatenate([p.traj_start + o for p, o in zip(parts, offsets)])
    context = traj_context = None
    if parts[0].context is not None:
      context = np.concatenate([p.context for p in parts])
      traj_context = np.concatenate([p.traj_context for p in parts])
    return cls(rows, starts, np.concatenate([p.traj_rows for p in parts]), context,
               traj_context)

  @property
  def nbytes(self):
    """Bytes of all its arrays."""
    return sum(v.nbytes for v in self.state().values())

  def state(self):
    state = dict(self.rows, traj_start=self.traj_start, traj_rows=self.traj_rows)
    if self.context is not None:
      state.update(context=self.context, traj_context=self.traj_context)
    return state

  @classmethod
  def from_state(cls, state):
    context = traj_context = None
    if 'traj_context' in state:
      context = np.asarray(state['context'])
      traj_context = np.asarray(state['traj_context'])
    return cls({f: np.asarray(state[f]) for f in ROW_FIELDS},
               np.asarray(state['traj_start']), np.asarray(state['traj_rows']), context,
               traj_context)


class RunningSegments:
  """The trajectory segments being collected right now, in time-major ring buffers.

  Row `k % size` holds every env's data of global vector step k, so each step
  is a few contiguous row writes (per-env scattered writes cost several times
  more in the collect loop). Env j's running segment spans global steps
  start[j] .. step; it is gathered only when it is flushed. `size` exceeds the
  longest running segment (Trajectories grows the ring before one would wrap),
  so no segment is overwritten while it runs.

  With stacked observations `obs` holds each step's newest frame and
  `context[j]` the older frames of the observation that env j's running
  segment started with (rl.data.frames); else `obs` holds the observations and
  `context` is None.
  """

  def __init__(self, n_envs, capacity, frame_space, act_shape, act_dtype, n_dist_inputs,
               context_shape=None):
    size = capacity + 1
    self.step = 0
    self.start = np.zeros(n_envs, np.int64)
    self.obs = np.zeros((size, n_envs) + frame_space.shape, frame_space.dtype)
    self.action = np.zeros((size, n_envs) + tuple(act_shape), act_dtype)
    self.reward = np.zeros((size, n_envs), np.float32)
    self.dist_inputs = np.zeros((size, n_envs, n_dist_inputs), np.float32)
    self.context = None
    if context_shape is not None:
      self.context = np.zeros((n_envs,) + tuple(context_shape), frame_space.dtype)

  @property
  def size(self):
    return self.obs.shape[0]

  @property
  def length(self):
    """Steps in each env's running segment."""
    return self.step - self.start

  def rows(self, j):
    """Ring rows of env j's segment: its steps and the observation after the last."""
    return (self.start[j] + np.arange(self.step - self.start[j] + 1)) % self.size

  def grow(self):
    """Doubles the ring, keeping every live row."""
    old, new = self.size, 2 * self.size
    live = np.arange(max(0, self.step - old + 1), self.step + 1)
    for name in ('obs', 'action', 'reward', 'dist_inputs'):
      buf = getattr(self, name)
      grown = np.zeros((new,) + buf.shape[1:], buf.dtype)
      grown[live % new] = buf[live % old]
      setattr(self, name, grown)

  def state(self):
    state = {'step': np.array(self.step), 'start': self.start, 'obs': self.obs,
             'action': self.action, 'reward': self.reward, 'dist_inputs': self.dist_inputs}
    if self.context is not None:
      state['context'] = self.context
    return state

  def load_state(self, state):
    self.step = int(state['step'])
    names = ('start', 'obs', 'action', 'reward', 'dist_inputs')
    for name in names + (('context',) if self.context is not None else ()):
      setattr(self, name, np.array(state[name]))


class Trajectories:
  """The running segments of a task's envs and the latest epochs of finished ones.

  Args:
    n_envs: envs collecting side by side (one running segment each).
    gamma: discount factor of the stored returns.
    observation_space, frame_space: the space of the observations the envs
      return and of one frame of them (the same without stacking).
    action_space: the envs' action space.
    num_stacked_frames: frames per observation (1: no stacking).
    segment_cap: the longest a running segment can get (the episode cap or
      max_steps); None when unbounded.
    n_replay_epochs: how many of the latest epochs are kept.
    dist_inputs_size: width of the stored policy outputs.
    reserved_rows: the device copies (slice_data) are padded to at least this
      many rows from the start, so that a replay filling over a run keeps
      one capacity bucket and the epoch reading it compiles once.
  """

  def __init__(self, n_envs, gamma, observation_space, frame_space, action_space,
               num_stacked_frames, segment_cap, n_replay_epochs, dist_inputs_size,
               reserved_rows=0):
    self.gamma = float(gamma)
    self.num_stacked_frames = num_stacked_frames
    self.n_replay_epochs = int(n_replay_epochs)
    self.reserved_rows = int(reserved_rows)
    # What a step stores of its observation: the newest frame when stacked.
    self._frame_channels = None
    context_shape = None
    if num_stacked_frames > 1:
      self._frame_channels = frame_space.shape[-1]
      shape = observation_space.shape
      context_shape = shape[:-1] + (shape[-1] - self._frame_channels,)
    capacity = min(int(segment_cap or 1000), INITIAL_SEGMENT_ROWS)
    # Under a cap that the ring holds every segment is flushed by the time it
    # fills the ring, and `write_step` skips the check.
    self._may_grow = not segment_cap or segment_cap > capacity
    self.segments = RunningSegments(n_envs, capacity, frame_space, action_space.shape or (),
                                    action_space.dtype, int(dist_inputs_size), context_shape)
    self.epochs = {}  # epoch id -> EpochData
    self._device_cache = {}
    self._ring = None  # the EpochRing of `replay`, made at its first call

  # -- collecting -------------------------------------------------------------------

  def frame(self, obs):
    """What the running segments store of observations: the newest frame when stacked."""
    if self._frame_channels is None:
      return obs
    return frames_lib.newest(obs, self._frame_channels)

  def begin(self, envs, obs):
    """The running segments of `envs` (an index) start now, with observations `obs`."""
    seg = self.segments
    seg.start[envs] = seg.step
    if seg.context is not None:
      seg.context[envs] = obs[..., :obs.shape[-1] - self._frame_channels]

  def restart(self, obs):
    """Every env's segment starts afresh at the current step, with observations `obs`."""
    seg = self.segments
    seg.obs[seg.step % seg.size] = self.frame(obs)
    self.begin(slice(None), obs)

  def write_step(self, actions, rewards, dist_inputs, next_obs):
    """Records one vector step: what every env did, and the observations after it.

    For an env whose episode just ended `next_obs` is its reset observation,
    the first row of its next segment (its final observation goes to `flush`).
    """
    seg = self.segments
    if self._may_grow and seg.length.max() >= seg.size - 1:
      seg.grow()
    row = seg.step % seg.size
    seg.action[row] = actions
    seg.reward[row] = rewards
    seg.dist_inputs[row] = dist_inputs
    seg.step += 1
    seg.obs[seg.step % seg.size] = self.frame(next_obs)

  def flush(self, j, final_obs, terminated, next_obs):
    """Env j's running segment as a trajectory (a dict of rows); its next starts at `next_obs`."""
    seg = self.segments
    rows = seg.rows(j)
    steps = len(rows) - 1
    obs = seg.obs[rows, j]
    obs[steps] = self.frame(final_obs)
    done = np.zeros(steps + 1, np.float32)
    done[steps - 1] = float(terminated)
    mask = np.ones(steps + 1, np.float32)
    mask[steps] = 0.0
    # The last row holds only the final observation: zero action, reward, inputs.
    action = seg.action[rows, j]
    action[steps] = 0
    reward = seg.reward[rows, j]
    reward[steps] = 0.0
    dist_inputs = seg.dist_inputs[rows, j]
    dist_inputs[steps] = 0.0
    trajectory = {
        'observation': obs,
        'action': action,
        'reward': reward,
        'done': done,
        'mask': mask,
        'dist_inputs': dist_inputs,
        'return_': discounted_returns(reward, done, self.gamma).astype(np.float32),
    }
    if seg.context is not None:
      trajectory['context'] = frames_lib.context(seg.context[j], obs[0],
                                                 self.num_stacked_frames)
    self.begin(j, next_obs)
    return trajectory

  def store(self, epoch_id, trajectories):
    """Adds flushed `trajectories` to epoch `epoch_id`; drops the epochs that age out."""
    lengths = np.array([len(t['mask']) for t in trajectories], np.int64)
    starts = np.concatenate([[0], np.cumsum(lengths)[:-1]]).astype(np.int64)
    rows = {f: np.concatenate([t[f] for t in trajectories]) for f in ROW_FIELDS}
    context = traj_context = None
    if self._frame_channels is not None:
      context = np.concatenate([t['context'] for t in trajectories])
      traj_context = np.array([len(t['context']) for t in trajectories], np.int64)
    data = EpochData(rows, starts, lengths, context, traj_context)
    if epoch_id in self.epochs:
      data = EpochData.concatenate([self.epochs[epoch_id], data])
    self.epochs[epoch_id] = data
    # Exactly the last n_replay_epochs epochs stay (epoch 0 ages out like any other).
    for key in [k for k in self.epochs if k <= epoch_id - self.n_replay_epochs]:
      del self.epochs[key]
    self._device_cache = {}
    if self._ring is not None:
      self._ring.update(self.epochs, epoch_id)

  # -- reading ---------------------------------------------------------------------

  def chosen(self, epochs):
    """The ids of the stored epochs that `epochs` selects (see `slice_data`), in order."""
    if not self.epochs:
      raise RuntimeError('no trajectories have been collected yet')
    keys = sorted(self.epochs)
    if epochs is None:
      chosen = keys
    else:
      last = keys[-1]
      chosen = sorted({e if e >= 0 else last + 1 + e for e in epochs} & set(keys))
      if not chosen:
        raise RuntimeError(f'none of the epochs {epochs} is in the buffer {keys}')
    return tuple(chosen)

  def selected(self, epochs):
    """The selected epochs' trajectories as one EpochData."""
    return EpochData.concatenate([self.epochs[k] for k in self.chosen(epochs)])

  def slice_data(self, epochs=None, whole_trajectories=False):
    """The trajectories of `epochs` on the device, padded (rl.data.slices.SliceData).

    Epochs: a list of epoch ids, negative ones counted from the newest (-1 is
    the newest); None means every stored epoch. whole_trajectories: for
    slices of whole trajectories (records the longest). The padded copy is
    made and moved to the device once per selection and kept until the
    epochs change; the merged host copy is not kept (for a large replay it
    would double the host memory).
    """
    cache_key = (self.chosen(epochs), whole_trajectories)
    cached = self._device_cache.get(cache_key)
    if cached is None:
      data = self.selected(epochs)
      cached = jax.device_put(slices.pad(
          data.rows, data.traj_start, data.traj_rows, whole_trajectories, data.context,
          data.traj_context, self.num_stacked_frames, min_rows=self.reserved_rows))
      self._device_cache[cache_key] = cached
    return cached

  def replay(self):
    """Every stored epoch on the device, as the ring of epochs that `store` updates with each
    new epoch (rl.data.replay_ring.Replay; read it with `replay_ring.as_slices`).

    With stacked frames, which the ring does not hold, `slice_data()`.
    """
    if self._frame_channels is not None:
      return self.slice_data()
    if self._ring is None:
      self._ring = replay_ring.EpochRing(self.n_replay_epochs)
      self._ring.update(self.epochs)
    return self._ring.replay

  # -- checkpointing -----------------------------------------------------------------

  def state(self):
    """The arrays that restore the epochs and the running segments exactly."""
    return {'epochs': {str(k): v.state() for k, v in self.epochs.items()},
            'segments': self.segments.state()}

  def load_state(self, arrays):
    self.epochs = {int(k): EpochData.from_state(v) for k, v in arrays['epochs'].items()}
    self.segments.load_state(arrays['segments'])
    self._device_cache = {}
    self._ring = None
