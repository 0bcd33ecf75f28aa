"""Every command README.md and docs/getting-started.md show runs, as shown, with tiny epoch counts.

A page's commands split into chains: a command that makes a run folder
(rl.run with a config file, launch.sweep) starts one, and a later command
that reads a folder (a resume, rl.evaluate, rl.report) runs after the chain
that made it, in the same temporary folder, which links the repository's
files (configs/, docs/, ...). Each chain is a test of its own, so the chains
run on both workers. A renamed config or a changed flag fails here.
"""
import os
import re
import shlex
import subprocess
import sys

import pytest

from run_helpers import ROOT

PAGES = ['README.md', os.path.join('docs', 'getting-started.md')]
# The README's first screen: install and train PPO on CartPole; install and test.
FIRST_COMMANDS = ['pip install . && python -m rl.run --config_file=configs/ppo_cartpole.gin',
                  "pip install '.[test]' && python -m pytest"]
# The modules whose commands run here, and what each gets appended to keep it
# tiny: two epochs a run, and a sweep's grid with one seed (the last --seeds wins).
TINY = ['--config', 'train_rl.n_epochs=2']
RUN = {'rl.run': TINY, 'launch.sweep': TINY + ['--seeds=0'], 'rl.evaluate': [], 'rl.report': []}
# Commands shown but not run here, each with the reason. Their config files
# must still exist (see `missing_paths`).
NOT_RUN = {
    'python -m pytest': 'the test suite itself',
    'python -m rl.run --config_file=configs/ppo_joint_pong.gin':
        "the GPU example: an Atari CNN whose first epoch takes minutes on a CPU "
        "(tests/test_frames.py trains this config for two tiny epochs and resumes it)",
}
# Programs whose commands are not run here, by name, each with the reason.
NOT_RUN_PROGRAMS = {
    'pip': 'installs packages; the suite runs on the installed checkout',
    'tensorboard': 'a server that runs until stopped',
    'nvidia-smi': 'needs a GPU',
}
# Flags whose value is a file of the repository that must exist.
PATH_FLAGS = ('--config_file', '--sweep')


def shown_commands(text):
  """The commands in a page's fenced bash blocks, one string each (`\\` lines joined)."""
  commands = []
  for block in re.findall(r'^```(?:bash|sh|shell|console)\n(.*?)^```', text, re.M | re.S):
    for line in block.replace('\\\n', ' ').splitlines():
      line = line.strip()
      if line.startswith('$ '):
        line = line[2:]
      line = re.sub(r'\s+#\s.*$', '', line)  # a trailing comment
      if line and not line.startswith('#'):
        commands.append(line)
  return commands


def steps(command):
  """A command's parts between `&&`, each a list of words."""
  words = shlex.split(command, comments=True)
  parts, current = [], []
  for word in words:
    if word == '&&':
      parts.append(current)
      current = []
    else:
      current.append(word)
  return parts + [current]


def module_of(words):
  """The module of `python -m MODULE ...`, else None."""
  if len(words) >= 3 and words[0] in ('python', 'python3') and words[1] == '-m':
    return words[2]
  return None


def plan(command):
  """What to do with each part of a shown command: ('run', words), ('skip', reason) or ('unknown', words)."""
  out = []
  for words in steps(command):
    joined = shlex.join(words)
    if joined in NOT_RUN:
      out.append(('skip', NOT_RUN[joined]))
    elif words[0] in NOT_RUN_PROGRAMS:
      out.append(('skip', NOT_RUN_PROGRAMS[words[0]]))
    elif module_of(words) in RUN:
      out.append(('run', words))
    else:
      out.append(('unknown', words))
  return out


def flag_values(words, flag):
  """The values of every `--flag=V` and `--flag V` in `words`, in order."""
  values = []
  for i, word in enumerate(words):
    if word.startswith(flag + '='):
      values.append(word.split('=', 1)[1])
    elif word == flag and i + 1 < len(words):
      values.append(words[i + 1])
  return values


def missing_paths(words):
  """The repository files a command names (config files, sweep files) that do not exist."""
  return [value for flag in PATH_FLAGS for value in flag_values(words, flag)
          if value and not os.path.isfile(os.path.join(ROOT, value))]


def check_shown(commands):
  """Problems found without running anything: unknown commands, missing files."""
  problems = []
  for command in commands:
    for action, detail in plan(command):
      if action == 'unknown':
        problems.append(f'{shlex.join(detail)!r}: neither run by this test nor in NOT_RUN '
                        '(add it there with the reason)')
    for words in steps(command):
      problems += [f'{command!r}: {path} does not exist' for path in missing_paths(words)]
  return problems


def workspace(tmp_path):
  """A folder that links every top-level entry of the repository except runs/."""
  for name in os.listdir(ROOT):
    if name != 'runs' and not name.startswith('.'):
      os.symlink(os.path.join(ROOT, name), tmp_path / name)
  return tmp_path


def page_commands(page):
  path = os.path.join(ROOT, page)
  if not os.path.exists(path):
    pytest.skip(f'{page} does not exist')
  with open(path, encoding='utf-8') as f:
    return shown_commands(f.read())


def test_the_readme_opens_with_the_two_commands():
  assert page_commands('README.md')[:2] == FIRST_COMMANDS


def test_the_readme_shows_every_module_this_test_runs():
  shown = {module_of(words) for command in page_commands('README.md')
           for words in steps(command)}
  assert set(RUN) <= shown, set(RUN) - shown


def test_a_renamed_config_or_an_unknown_command_is_caught():
  text = ('```bash\npython -m rl.run --config_file=configs/renamed.gin\n'
          'python -m rl.evaluat --output_dir=runs/x\n```\n')
  problems = check_shown(shown_commands(text))
  assert len(problems) == 2, problems
  assert 'configs/renamed.gin does not exist' in problems[0]
  assert "'python -m rl.evaluat --output_dir=runs/x': neither run" in problems[1]


def flag_value(words, flag):
  """The value of the first `--flag=V` or `--flag V` in `words`, else None."""
  return next(iter(flag_values(words, flag)), None)


def folders(words):
  """(the folder a command makes or None, the folders it reads) of `python -m MODULE ...`."""
  module = module_of(words)
  output_dir = flag_value(words, '--output_dir')
  config = flag_value(words, '--config_file')
  if module in ('rl.run', 'launch.sweep') and config:
    stem = os.path.splitext(os.path.basename(config))[0]
    return os.path.normpath(output_dir or os.path.join('runs', stem)), []
  if module == 'rl.report':
    return None, [os.path.normpath(w) for w in words[3:] if not w.startswith('-')]
  return None, [os.path.normpath(output_dir)] if output_dir else []


def chains(commands):
  """The commands to run, as lists of words, in independent chains.

  A command that reads a folder joins the chain that made that folder or a
  folder inside it (`rl.report runs/` joins the first); one that reads none
  of them starts a chain of its own.
  """
  out, made_by = [], {}
  for command in commands:
    for action, words in plan(command):
      if action != 'run':
        continue
      made, read = folders(words)
      chain = next((made_by[m] for r in read for m in made_by
                    if m == r or m.startswith(r + os.sep)), None)
      if chain is None:
        chain = len(out)
        out.append([])
      out[chain].append(words)
      if made is not None:
        made_by.setdefault(made, chain)
  return out


def test_commands_that_read_a_folder_run_after_the_command_that_made_it():
  shown = ['python -m rl.run --config_file=configs/a.gin',
           'python -m rl.run --config_file=configs/b.gin --output_dir runs/b',
           'python -m rl.run --output_dir runs/b', 'python -m rl.evaluate --output_dir=runs/a',
           'python -m rl.report runs/', 'python -m launch.sweep --config_file=configs/a.gin '
           '--sweep=s.yaml --output_dir=runs/s', 'python -m rl.report runs/s']
  assert [[words[-1] for words in chain] for chain in chains(shown)] == [
      ['--config_file=configs/a.gin', '--output_dir=runs/a', 'runs/'],
      ['runs/b', 'runs/b'], ['--output_dir=runs/s', 'runs/s']]


def page_chains():
  """(page, chain number) of every chain of every page, the tests' parameters."""
  out = []
  for page in PAGES:
    path = os.path.join(ROOT, page)
    if os.path.exists(path):
      with open(path, encoding='utf-8') as f:
        out += [(page, i) for i in range(len(chains(shown_commands(f.read()))))]
  return out


@pytest.mark.parametrize('page', PAGES)
def test_every_shown_command_is_run_or_skipped_with_a_reason(page):
  commands = page_commands(page)
  problems = check_shown(commands)
  assert not problems, '\n'.join(problems)
  assert chains(commands), f'{page} shows no command this test runs'


@pytest.mark.parametrize('page, chain', page_chains())
def test_every_shown_command_runs(page, chain, tmp_path):
  folder = workspace(tmp_path)
  env = dict(os.environ, PYTHONPATH=os.pathsep.join(
      [ROOT] + ([os.environ['PYTHONPATH']] if os.environ.get('PYTHONPATH') else [])))
  for words in chains(page_commands(page))[chain]:
    args = [sys.executable] + words[1:] + RUN[module_of(words)]
    result = subprocess.run(args, cwd=folder, env=env, capture_output=True, text=True,
                            timeout=300)
    assert result.returncode == 0, (f'{page}: {shlex.join(words)} exited '
                                    f'{result.returncode}:\n{result.stderr[-2000:]}')
