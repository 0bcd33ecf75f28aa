"""The time a run (or a job of several runs) has left, from the epochs this process timed.

Epochs that evaluate take longer than those that don't, and evaluations come
every `eval_every` epochs (and at the last), so the two are timed apart and
the epochs left are counted by kind. Two epochs are not used: the first this
process runs (it compiles everything) and its first evaluating epoch (it
compiles the evaluation). Until an evaluation has been timed, the epochs that
will evaluate are counted at the plain epochs' rate, and the estimate says it
is a lower bound.
"""
import time


def epochs_left(done, n_epochs, eval_every, n_eval_episodes):
  """(plain epochs, evaluating epochs) after epoch `done` up to `n_epochs`.

  An epoch evaluates when it is a multiple of eval_every or the last
  (rl.learner.learner.Learner.run_epoch), and only with eval episodes.
  """
  if n_epochs <= done:
    return 0, 0
  n_eval = 0
  if n_eval_episodes:
    n_eval = n_epochs // eval_every - done // eval_every
    n_eval += n_epochs % eval_every != 0  # the last epoch always evaluates
  return n_epochs - done - n_eval, n_eval


class TimeLeft:
  """Wall seconds per plain and per evaluating epoch, from the ends of the epochs timed.

  clock: seconds (time.perf_counter); tests pass their own.
  """

  def __init__(self, clock=time.perf_counter):
    self._clock = clock
    self._last_end = None
    self._plain_seconds = 0.0
    self._plain_count = 0
    self._eval_seconds = None  # the latest evaluating epoch's, once one is usable
    self._evals_seen = 0

  def epoch_done(self, evaluated):
    """Books the end of an epoch (evaluated: whether it evaluated)."""
    now = self._clock()
    if evaluated:
      self._evals_seen += 1
    if self._last_end is not None:
      seconds = now - self._last_end
      if not evaluated:
        self._plain_seconds += seconds
        self._plain_count += 1
      elif self._evals_seen > 1:
        self._eval_seconds = seconds
    self._last_end = now

  def estimate(self, n_plain, n_eval):
    """(seconds, exact) for the epochs left, or None before any epoch is usable.

    exact False: evaluating epochs are counted at the plain rate (none timed yet).
    """
    plain = self._plain_seconds / self._plain_count if self._plain_count else None
    evaluating = self._eval_seconds
    if plain is None and evaluating is None:
      return None
    if plain is None:
      return evaluating * (n_plain + n_eval), True
    if evaluating is None:
      return plain * (n_plain + n_eval), n_eval == 0
    return plain * n_plain + evaluating * n_eval, True
