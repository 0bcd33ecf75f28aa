"""The one error type of launch/: bad input, reported as one line with exit status 2."""


class SweepError(Exception):
  """Bad input to a sweep (flags, sweep file, backend); its message names the fix."""
