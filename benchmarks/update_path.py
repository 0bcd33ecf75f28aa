"""Counts the lines a reader must read to follow one epoch's update of an algorithm.

Builds a config's trainer, collects one epoch and traces the algorithm's
update as the learner calls it, recording every function of this repository
that the trace runs: the path from the algorithm's `update` down to the
losses, the advantages and the minibatch draw. The learner's own work around
the call (the networks' normaliser statistics before it, the EpochResults of
its StepRecords after it) is not on it.
Collection, the env step, the network bodies (rl/nets), the action
distributions and the optimizers with their schedules (rl/optim) are not on it. A function counts once with all its lines
(nested functions included); the script prints, per file, the lines and the
lines of code (no blank lines, comments or docstrings), then the totals.

  python benchmarks/update_path.py configs/ppo_cartpole.gin
  python benchmarks/update_path.py configs/dqn_cartpole.gin --functions
"""
import argparse
import ast
import collections
import inspect
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

# Not the update: acting and collection, the env step, network bodies, the action
# distributions, the optimizers and their learning-rate schedules (optax's part).
EXCLUDED = ('rl/envs/', 'rl/nets/', 'rl/ops/distributions.py', 'rl/optim/', 'rl/compiler.py',
            'rl/learner/acting.py')


def traced_functions(config, bindings):
  """The code objects of this repository that tracing `config`'s update runs."""
  import gin  # pylint: disable=import-outside-toplevel
  import jax  # pylint: disable=import-outside-toplevel

  import rl.algorithms  # noqa: F401  pylint: disable=import-outside-toplevel,unused-import
  from rl import config as config_lib  # pylint: disable=import-outside-toplevel
  from rl import experiment  # noqa: F401  pylint: disable=import-outside-toplevel,unused-import
  from rl.envs.task import RLTask  # pylint: disable=import-outside-toplevel
  config_lib.parse_config([config], bindings)
  trainer_class = gin.get_configurable(gin.query_parameter('train_rl.trainer_class').selector)
  trainer = trainer_class(task=RLTask())
  learner = trainer.learner
  learner.collect(epoch_id=1)
  data = trainer.epoch_data(1)
  from rl.learner.state import with_acting_statistics  # pylint: disable=import-outside-toplevel
  state = with_acting_statistics(learner.train_state)
  seen = set()

  def record(frame, event, arg):
    del arg
    if event == 'call':
      path = os.path.relpath(frame.f_code.co_filename, ROOT)
      if not path.startswith('..') and not path.startswith(EXCLUDED) and path.endswith('.py'):
        seen.add(frame.f_code)
  sys.setprofile(record)
  try:
    jax.jit(trainer.update).lower(state, data)
  finally:
    sys.setprofile(None)
  return seen


def docstring_lines(tree):
  """The line numbers of every docstring in a module's syntax tree."""
  lines = set()
  for node in ast.walk(tree):
    if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
      body = node.body
      if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \
          and isinstance(body[0].value.value, str):
        lines.update(range(body[0].lineno, body[0].end_lineno + 1))
  return lines


def count(codes):
  """{file: (lines, lines of code, [function names])}, each function's lines counted once."""
  per_file = collections.defaultdict(set)
  names = collections.defaultdict(list)
  for code in codes:
    try:
      source, start = inspect.getsourcelines(code)
    except (OSError, TypeError):
      continue
    path = os.path.relpath(code.co_filename, ROOT)
    per_file[path].update(range(start, start + len(source)))
    names[path].append(code.co_qualname)
  counts = {}
  for path, lines in per_file.items():
    with open(os.path.join(ROOT, path), encoding='utf-8') as f:
      text = f.read()
    all_lines = text.splitlines()
    docs = docstring_lines(ast.parse(text))
    code_lines = [n for n in lines if n not in docs and all_lines[n - 1].strip()
                  and not all_lines[n - 1].strip().startswith('#')]
    counts[path] = (len(lines), len(code_lines), sorted(names[path]))
  return counts


def main():
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument('config')
  parser.add_argument('--config', dest='bindings', action='append', default=[],
                      help='a gin binding applied after the file')
  parser.add_argument('--functions', action='store_true', help='list the functions too')
  args = parser.parse_args()
  # A small epoch: the path does not depend on its size.
  counts = count(traced_functions(args.config, args.bindings))
  for path, (lines, code, functions) in sorted(counts.items()):
    print(f'{path:40s} {lines:5d} lines {code:5d} of code')
    if args.functions:
      for name in functions:
        print(f'    {name}')
  total = sum(c[0] for c in counts.values())
  total_code = sum(c[1] for c in counts.values())
  print(f'{len(counts)} files, {total} lines, {total_code} of code')


if __name__ == '__main__':
  main()
