"""rl.data.slices: capacity buckets, padding, and the device-side sampling of slices.

The trajectories here are built by hand: each row carries its trajectory's id
(1, 2, ...; 0 only in padding) and its position t in the trajectory as the
observation, so every sampled row says where it came from.
"""
import collections

import jax
import numpy as np
import pytest

from rl.data import slices


def epoch_arrays(steps):
  """Flat rows of trajectories of `steps[i]` steps (steps + 1 rows each), and offsets."""
  observation, traj, mask, starts, counts = [], [], [], [], []
  offset = 0
  for i, n in enumerate(steps, start=1):
    rows = n + 1
    observation.append(np.arange(rows, dtype=np.float32))
    traj.append(np.full(rows, i, np.int32))
    mask.append(np.r_[np.ones(n, np.float32), 0.0])  # the final observation row: mask 0
    starts.append(offset)
    counts.append(rows)
    offset += rows
  rows = {'observation': np.concatenate(observation)[:, None],
          'traj': np.concatenate(traj),
          'mask': np.concatenate(mask).astype(np.float32)}
  return rows, np.array(starts, np.int32), np.array(counts, np.int32)


def padded(steps, whole_trajectories=False):
  rows, starts, counts = epoch_arrays(steps)
  return slices.pad(rows, starts, counts, whole_trajectories)


sample_jit = jax.jit(slices.sample, static_argnums=(2, 3, 4, 5, 6))


def draw(data, batch_size, window=None, length=None, margin=0, uniform=False, seed=0):
  fields = sample_jit(data, jax.random.PRNGKey(seed), batch_size, window, length, margin,
                      uniform)
  return {k: np.asarray(v) for k, v in fields.items()}


# -- capacity buckets -------------------------------------------------------------------

def test_capacities_are_min_rows_times_powers_of_four_then_powers_of_two():
  assert slices.MIN_ROWS == 512
  assert [slices.capacity(n) for n in (0, 1, 512)] == [512] * 3
  assert [slices.capacity(n) for n in (513, 2048)] == [2048] * 2
  assert slices.capacity(2049) == 8192
  assert slices.capacity(8193) == 32768 == slices.FINE_ROWS
  # Above FINE_ROWS a large buffer pads to at most twice its rows.
  assert [slices.capacity(n) for n in (32769, 131073, 1_000_000)] == [2**16, 2**18, 2**20]
  assert slices.capacity(2**20 + 1) == 2**21


@pytest.mark.parametrize('n_steps, size', [(511, 512), (512, 2048)])
def test_pad_fills_the_bucket_with_zero_rows_and_empty_trajectories(n_steps, size):
  # One trajectory of n_steps steps has n_steps + 1 rows: 512 fit the first
  # bucket exactly, 513 need the next one.
  data = padded([n_steps])
  n_rows = n_steps + 1
  assert all(len(column) == size for column in data.rows.values())
  assert data.traj_start.shape == data.traj_rows.shape == (size // 2,)
  np.testing.assert_array_equal(data.traj_rows[:2], [n_rows, 0])
  np.testing.assert_array_equal(data.traj_rows[1:], 0)
  for column in data.rows.values():
    np.testing.assert_array_equal(column[n_rows:], 0)
  assert data.max_rows is None  # only recorded for whole-trajectory slices


# -- what is drawn ------------------------------------------------------------------------

STEPS = [2, 5, 1, 3]  # rows 3, 6, 2, 4


@pytest.mark.parametrize('uniform', [False, True], ids=['by_slices', 'uniform'])
def test_padding_trajectories_are_never_drawn(uniform):
  data = padded(STEPS)
  assert len(data.traj_rows) == 256  # 4 real trajectories, 252 padding ones
  batch = draw(data, 4000, window=1, uniform=uniform)
  # Every slice starts on a real step of a real trajectory.
  assert set(batch['traj'][:, 0]) == {1, 2, 3, 4}
  np.testing.assert_array_equal(batch['mask'], 1)


def test_trajectories_are_drawn_by_their_slice_counts_or_uniformly():
  data = padded(STEPS)
  # Window 1: a trajectory of R rows has R - 1 slices (its steps): 2, 5, 1, 3.
  by_slices = collections.Counter(draw(data, 11000, window=1)['traj'][:, 0])
  uniform = collections.Counter(draw(data, 8000, window=1, uniform=True)['traj'][:, 0])
  for i, n in enumerate(STEPS, start=1):
    assert by_slices[i] / 11000 == pytest.approx(n / 11, abs=0.02)
    assert uniform[i] / 8000 == pytest.approx(1 / 4, abs=0.02)


@pytest.mark.parametrize('margin', [0, 2])
def test_slices_never_cross_a_trajectory_end(margin):
  """Past its trajectory's last row a slice is padding: mask 0 and zeros."""
  window, length = 4, 6
  data = padded(STEPS)
  batch = draw(data, 2000, window=window, length=length, margin=margin)
  traj, t, mask = batch['traj'], batch['observation'][..., 0], batch['mask']
  assert traj.shape == mask.shape == (2000, length)
  rows = {i: n + 1 for i, n in enumerate(STEPS, start=1)}
  starts = set()
  for b in range(2000):
    i, start = int(traj[b, 0]), int(t[b, 0])
    starts.add((i, start))
    for p in range(length):
      if p < window and start + p < rows[i]:
        # The slice's own trajectory, row after row.
        assert traj[b, p] == i and t[b, p] == start + p
        assert mask[b, p] == float(start + p < rows[i] - 1)
      else:
        assert traj[b, p] == 0 and t[b, p] == 0 and mask[b, p] == 0
  # A trajectory of R rows has max(1, R + margin - window) starts 0, 1, ...:
  # all of them are drawn, and no other.
  expected = {(i, s) for i, r in rows.items() for s in range(max(1, r + margin - window))}
  assert starts == expected


def test_whole_trajectory_windows():
  data = padded(STEPS, whole_trajectories=True)
  # The longest trajectory has 6 rows: windows of the next power of two, 8.
  assert data.max_rows == 8
  batch = draw(data, 400)  # window None: whole trajectories
  assert batch['mask'].shape == (400, 8)
  assert set(batch['traj'][:, 0]) == {1, 2, 3, 4}
  for b in range(400):
    i = int(batch['traj'][b, 0])
    rows = STEPS[i - 1] + 1
    # The whole trajectory from its first row, then padding.
    np.testing.assert_array_equal(batch['observation'][b, :, 0],
                                  np.r_[np.arange(rows), np.zeros(8 - rows)])
    np.testing.assert_array_equal(batch['traj'][b], np.r_[np.full(rows, i), np.zeros(8 - rows)])
    np.testing.assert_array_equal(batch['mask'][b], np.r_[np.ones(rows - 1), np.zeros(9 - rows)])
  # Whole trajectories are drawn uniformly (one slice each).
  counts = collections.Counter(batch['traj'][:, 0])
  assert all(abs(c / 400 - 0.25) < 0.08 for c in counts.values())
  # Padded further with `length`.
  assert draw(data, 4, length=10)['mask'].shape == (4, 10)
  assert np.all(draw(data, 4, length=10)['mask'][:, 8:] == 0)


def test_whole_trajectory_window_is_the_next_power_of_two():
  assert [slices.whole_window(n) for n in (1, 2, 3, 4, 5, 8, 9)] == [2, 2, 4, 4, 8, 8, 16]
  assert padded([3], whole_trajectories=True).max_rows == 4  # 4 rows


# -- determinism under jit --------------------------------------------------------------

@pytest.mark.parametrize('window', [3, None], ids=['window', 'whole'])
def test_sample_under_jit_is_a_function_of_the_key(window):
  data = jax.device_put(padded(STEPS, whole_trajectories=window is None))
  key = jax.random.PRNGKey(3)
  args = (16, window, 5, 1, False)
  first = jax.jit(slices.sample, static_argnums=(2, 3, 4, 5, 6))(data, key, *args)
  # A separately compiled function, same key: the same slices.
  again = jax.jit(slices.sample, static_argnums=(2, 3, 4, 5, 6))(data, key, *args)
  for name in first:
    np.testing.assert_array_equal(np.asarray(first[name]), np.asarray(again[name]))
  # Another key draws other slices.
  other = jax.jit(slices.sample, static_argnums=(2, 3, 4, 5, 6))(
      data, jax.random.PRNGKey(4), *args)
  assert any(not np.array_equal(np.asarray(first[n]), np.asarray(other[n])) for n in first)


def test_the_capacity_does_not_change_what_is_drawn():
  """A buffer drawn from at two capacities gives the same slices (the bucket is only room)."""
  data = padded(STEPS)
  grow = lambda x: np.concatenate([x, np.zeros((3 * len(x),) + x.shape[1:], x.dtype)])
  bigger = slices.SliceData({k: grow(v) for k, v in data.rows.items()}, grow(data.row_end),
                            grow(data.traj_start), grow(data.traj_rows))
  for args in ((64, 3, 5, 1, False), (64, 2, None, 0, True)):
    first, second = (draw(d, *args) for d in (data, bigger))
    for name in first:
      np.testing.assert_array_equal(first[name], second[name])


@pytest.mark.parametrize('window, margin', [(3, 1), (None, 0)], ids=['windows', 'whole'])
def test_a_precomputed_draw_table_draws_the_same_slices(window, margin):
  data = padded(STEPS, whole_trajectories=window is None)
  key = jax.random.PRNGKey(3)
  table = slices.draw_table(data, window, margin)
  counts = [1] * 4 if window is None else [max(1, r + margin - window) for r in (3, 6, 2, 4)]
  assert int(table.total) == sum(counts)  # padding trajectories add no slices
  # Slice numbers 0..total - 1, trajectory after trajectory.
  np.testing.assert_array_equal(table.trajectory[:sum(counts)],
                                np.repeat(np.arange(4), counts))
  given = slices.sample(data, key, 64, window, margin=margin, table=table)
  computed = slices.sample(data, key, 64, window, margin=margin)
  for name in computed:
    np.testing.assert_array_equal(given[name], computed[name])


def test_a_draw_tables_trajectories_are_those_the_cumulative_counts_give():
  """Slice number d belongs to the first trajectory whose cumulative slice count exceeds d,
  with trajectories that have no slice (padding) skipped over."""
  data = padded(STEPS + [1, 5])  # a 2-row trajectory has one slice of 3 with margin 1
  table = slices.draw_table(data, 3, 1)
  counts = np.where(np.asarray(data.traj_rows) > 0,
                    np.maximum(1, np.asarray(data.traj_rows) + 1 - 3), 0)
  cdf = np.cumsum(counts)
  total = int(table.total)
  assert total == cdf[-1] == sum(max(1, n + 1 + 1 - 3) for n in STEPS + [1, 5])
  np.testing.assert_array_equal(np.asarray(table.trajectory)[:total],
                                np.searchsorted(cdf, np.arange(total), side='right'))


def test_a_draw_table_needs_slices_that_train_a_row():
  with pytest.raises(ValueError, match='margin 3 must be below the window'):
    slices.draw_table(padded(STEPS), 3, 3)
