"""The console's parts on their own: throttle, progress lines, time left, the lines a run prints.

Clocks and waits are the tests' own, so nothing here depends on timing.
"""
import queue
import types

from rl import console
from rl import metrics
from rl.learner import loop as loop_lib
from rl.learner import time_left


class Clock:
  """A clock that moves only when told."""

  def __init__(self):
    self.now = 0.0

  def __call__(self):
    return self.now


def test_throttle_shows_the_first_line_forced_ones_and_one_per_interval():
  clock = Clock()
  throttle = console.Throttle(every_seconds=5, clock=clock)
  shown = []
  for second in range(13):
    clock.now = second
    shown.append(throttle.show(forced=second == 7))
  # 0 (first), 5 (interval), 7 (forced, which restarts the interval), 12 (interval).
  assert [s for s, show in enumerate(shown) if show] == [0, 5, 7, 12]
  verbose = console.Throttle(every_seconds=5, verbose=True, clock=clock)
  assert all(verbose.show() for _ in range(3))


def test_heartbeat_says_the_status_at_each_beat_and_nothing_after_stop():
  ticks, said = queue.Queue(), queue.Queue()
  count = iter(range(100))

  def wait(stop):
    return ticks.get() == 'stop' or stop.is_set()

  beat = console.Heartbeat(said.put, lambda: f'status {next(count)}', every=None, wait=wait)
  beat.start()
  ticks.put('tick')
  assert said.get(timeout=60) == 'status 0'
  ticks.put('tick')
  assert said.get(timeout=60) == 'status 1'
  ticks.put('stop')
  beat.stop()  # returns once its thread has ended: no line can follow
  assert said.empty()


def test_heartbeat_stop_ends_its_wait_at_once():
  said = []
  beat = console.Heartbeat(said.append, lambda: 'status', every=3600).start()
  beat.stop()  # would hang for an hour if the wait did not end with the stop
  assert said == []


def test_epochs_left_counts_the_evaluating_ones_and_the_last():
  assert time_left.epochs_left(0, 20, 5, 10) == (16, 4)
  assert time_left.epochs_left(4, 22, 5, 10) == (13, 5)  # 5, 10, 15, 20 and the last, 22
  assert time_left.epochs_left(20, 22, 5, 10) == (1, 1)
  assert time_left.epochs_left(3, 6, 5, 0) == (3, 0)  # no eval episodes: nothing evaluates
  assert time_left.epochs_left(6, 6, 5, 10) == (0, 0)


def estimates(n_epochs, eval_every, plain_s, eval_s, first_eval_s):
  """The time left after each epoch of a run whose epochs take the given seconds."""
  clock = Clock()
  left = time_left.TimeLeft(clock)
  out, evals = [], 0
  for epoch in range(1, n_epochs + 1):
    evaluated = epoch % eval_every == 0 or epoch == n_epochs
    evals += evaluated
    clock.now += 30 if epoch == 1 else (first_eval_s if evals == 1 and evaluated
                                         else eval_s if evaluated else plain_s)
    left.epoch_done(evaluated)
    out.append(left.estimate(*time_left.epochs_left(epoch, n_epochs, eval_every, 10)))
  return out


def test_time_left_does_not_jump_at_the_first_evaluating_epoch():
  # Plain epochs take 1 s, evaluating ones 3 s, the first of those 20 s (it compiles).
  out = estimates(30, 5, 1.0, 3.0, 20.0)
  assert out[0] is None  # the first epoch compiles: nothing to go by
  # Until an evaluation is timed, the evaluating epochs count at the plain
  # rate and the estimate says it is a lower bound; it only goes down.
  assert out[1] == (28.0, False)
  before_second_eval = [s for s, _ in out[1:9]]
  assert before_second_eval == [28.0 - i for i in range(8)]
  assert out[4] == (25.0, False)  # epoch 5: its 20 s of compiling are not in it
  # From the second evaluation on, exact: after epoch 10, 16 plain epochs at
  # 1 s and 4 evaluating ones (15, 20, 25, 30) at 3 s.
  assert out[9] == (16 * 1.0 + 4 * 3.0, True)
  assert out[10] == (15 * 1.0 + 4 * 3.0, True)
  assert out[-1] == (0.0, True)


def test_time_left_when_every_epoch_evaluates():
  # The first epoch compiles (its evaluation too): epoch 2 times an evaluation.
  out = estimates(6, 1, 1.0, 2.0, 9.0)
  assert out == [None, (4 * 2.0, True), (3 * 2.0, True), (2 * 2.0, True), (2.0, True),
                 (0.0, True)]


def test_console_line_formats_the_time_left_and_the_interval_throughput():
  record = {'epoch': 12, 'env_steps': 24000, 'train_return': 87.25, 'eval_return': 120.0}
  assert metrics.console_line(record, 100, (42.0, True), 3400.4) == (
      'epoch 12/100 | env steps 24,000 | train 87.2 | eval 120.0 | 3,400 steps/s | left 0:42')
  assert metrics.console_line(record, 100, (3700.0, False), None).endswith('| left 1:01:40+')
  first = dict(record, time_compile=9.87)
  assert metrics.console_line(first, 100, None, None).endswith('| 9.9 s incl. compiling')


def test_run_lines():
  assert console.plural(1, 'epoch') == '1 epoch'
  assert console.plural(99840, 'env step') == '99,840 env steps'
  assert console.run_line('CartPole-v1', 'PPO', 0, 5, False, 'runs/x') == (
      'Starting runs/x: CartPole-v1, trainer PPO, 5 epochs.')
  assert console.run_line('CartPole-v1', 'PPO', 2, 5, False, 'runs/x') == (
      'Resuming runs/x from epoch 2/5: CartPole-v1, trainer PPO.')
  assert console.run_line('CartPole-v1', 'PPO', 5, 5, True, 'runs/x') == (
      'runs/x is already complete: 5/5 epochs (CartPole-v1, trainer PPO); nothing to train.')
  assert console.next_steps('runs/my run/seed_0', 'runs/my run').splitlines() == [
      'Next:', "  python -m rl.evaluate --output_dir='runs/my run/seed_0'",
      "  tensorboard --logdir 'runs/my run'", "  python -m rl.report 'runs/my run'"]


class FakeLearner:
  """Epochs of 1 s on the tests' clock, every 5th evaluating; what EpochLoop reads of a learner."""

  def __init__(self, clock):
    self.clock = clock
    self.epoch = 0
    self.history = []
    self.options = types.SimpleNamespace(eval_every=5, n_eval_episodes=2)
    self.task = types.SimpleNamespace(n_interactions=0, jax_native=False)
    self.phase = 'collecting'
    self.last_epoch = None

  def run_epoch(self):
    self.epoch += 1
    self.clock.now += 1.0
    self.task.n_interactions += 100
    record = {'epoch': self.epoch, 'env_steps': self.task.n_interactions, 'train_return': 1.0,
              'time_collect': 0.5, 'time_train': 0.5}
    if self.epoch % 5 == 0 or self.epoch == self.last_epoch:
      record.update(eval_return=2.0, time_eval=0.0)
    return record


def test_epoch_loop_sends_every_line_to_the_log_and_a_few_to_the_console():
  clock = Clock()
  learner = FakeLearner(clock)
  lines = []
  settings = console.console_settings(every_seconds=3.0, progress_seconds=0)
  loop = loop_lib.EpochLoop(learner, 12, log=lambda line, quiet=False, progress=False:
                            lines.append((line, quiet, progress)), console=settings,
                            clock=clock)
  loop_lib.run(loop)
  assert lines[0] == ('epoch 1/12: compiling acting and training (the first epoch of a '
                      'process is slow) ...', False, True)
  epoch_lines = [(line.split(' |')[0], quiet) for line, quiet, progress in lines if not progress]
  assert len(epoch_lines) == 12  # log.txt keeps every epoch
  shown = [line for line, quiet in epoch_lines if not quiet]
  # The first, then one per 3 s, and every evaluating epoch (5, 10) and the last.
  assert shown == ['epoch 1/12', 'epoch 4/12', 'epoch 5/12', 'epoch 8/12', 'epoch 10/12',
                   'epoch 12/12']
  # A line's throughput counts the env steps since the previous shown line
  # (100 a second here), evaluation left out.
  assert next(l for l, _, _ in lines if l.startswith('epoch 4/12 |')).startswith(
      'epoch 4/12 | env steps 400 | train 1.0 | 100 steps/s | left ')


def test_time_left_of_a_seed_counts_the_seeds_after_it():
  clock = Clock()
  lines = []
  loop = loop_lib.EpochLoop(FakeLearner(clock), 12, log=lambda line, **_: lines.append(line),
                            console=console.console_settings(verbose=True, progress_seconds=0),
                            later=(5, 1), clock=clock)
  loop_lib.run(loop)
  # Its own epochs are done; 5 plain and 1 evaluating epoch of the next seeds
  # are left, at 1 s each (the fake's epochs, evaluating or not).
  assert lines[-1].endswith('| left 0:06')


def verbose_epoch_lines(learner, n_epochs, clock):
  """The epoch lines of an EpochLoop run of `learner` with every line shown."""
  lines = []
  loop = loop_lib.EpochLoop(learner, n_epochs, log=lambda line, **_: lines.append(line),
                            console=console.console_settings(verbose=True, progress_seconds=0),
                            clock=clock)
  loop_lib.run(loop)
  return [l for l in lines if ' | ' in l]


def test_throughput_leaves_out_the_seconds_of_evaluation():
  """An evaluation that compiles for 10 s (gymnax's first) is not counted as env steps' time."""
  clock = Clock()
  learner = FakeLearner(clock)
  run_epoch = learner.run_epoch

  def slow_evaluation():
    record = run_epoch()
    if 'eval_return' in record:
      clock.now += 10.0
      record['time_eval'] = 10.0
    return record
  learner.run_epoch = slow_evaluation
  epoch_lines = verbose_epoch_lines(learner, 6, clock)
  assert 'steps/s' not in epoch_lines[0]  # the first epoch compiles: no throughput
  assert all('| 100 steps/s |' in l for l in epoch_lines[1:]), epoch_lines


def test_throughput_of_epochs_booked_together_is_their_own():
  """A JAX-native call's epochs are read at once and booked in a burst: each line's
  throughput is over the epochs' own seconds, not the clock between the lines."""
  clock = Clock()
  learner = FakeLearner(clock)
  run_epoch = learner.run_epoch

  def in_calls_of_four():
    record = run_epoch()
    clock.now += 3.0 if learner.epoch % 4 == 1 else -1.0  # a call's 4 s, all at its first
    return record
  learner.run_epoch = in_calls_of_four
  epoch_lines = verbose_epoch_lines(learner, 12, clock)
  assert all('| 100 steps/s |' in l for l in epoch_lines[1:]), epoch_lines
