"""docs/parameters.md: generated from the docstrings, current, and complete."""
import contextlib
import importlib.util
import inspect
import io
import subprocess
import sys

import gin
import pytest

import rl.experiment  # registers every configurable
from rl import configurables
from rl import parameters_doc
from run_helpers import ROOT
from run_helpers import assert_one_line_error

PAGE = f'{ROOT}/docs/parameters.md'


@gin.configurable('parameters_doc_probe', denylist=['hidden'])
def _probe(documented=1, undocumented=2, hidden=3):
  """A configurable with a parameter its docstring leaves out.

  Args:
    documented: the one described.
    hidden: denylisted: no binding reaches it.
  """
  return documented, undocumented, hidden


class _ProbeBase:
  """A base class whose subclass sets some of its parameters.

  Args:
    passed: the subclass passes it to this constructor.
    overwritten: the subclass writes it into its **kwargs.
    inherited: the base's meaning.
  """

  def __init__(self, passed=1, overwritten=2, inherited=3):
    self.values = (passed, overwritten, inherited)


@gin.configurable('parameters_doc_probe_class')
class _ProbeChild(_ProbeBase):
  """A subclass that sets two of its base's parameters itself, and declares them.

  Args:
    own: the subclass's own parameter.
    inherited: the subclass's meaning.
    **kwargs: _ProbeBase's arguments.
  """

  fixed_parameters = ('passed', 'overwritten')

  def __init__(self, own=4, **kwargs):
    kwargs['overwritten'] = 5
    super().__init__(passed=own, **kwargs)


def test_page_is_current():
  with open(PAGE, encoding='utf-8') as f:
    page = f.read()
  assert page == parameters_doc.page(), (
      'docs/parameters.md is out of date: run python -m rl.parameters_doc')


def test_every_parameter_of_every_registered_configurable_has_a_description():
  described = parameters_doc.all_configurables()
  assert {c.name for c in described} == set(configurables.registered_names())
  missing = parameters_doc.undocumented(described)
  assert not missing, (f'no description for {", ".join(missing)}: add each to the Args: '
                       'section of the docstring that declares it')


def test_registered_names_are_every_configurable_gin_knows_in_the_package():
  """The package's list of its configurables (recorded as they register) against gin's registry.

  gin lists no names, but `gin.get_configurable` tells of any function or class
  whether gin registered it: every one defined in a module of the package is asked.
  """
  registered_by_gin = set()
  for name, module in list(sys.modules.items()):
    if name != 'rl' and not name.startswith('rl.'):
      continue
    for value in vars(module).values():
      if not callable(value) or getattr(value, '__module__', None) != name:
        continue
      try:
        registered_by_gin.add(gin.get_configurable(value))
      except ValueError:
        continue
  listed = {gin.get_configurable(name) for name in configurables.registered_names()}
  assert listed == registered_by_gin
  assert len(listed) == len(configurables.registered_names()) >= 30


def test_an_undocumented_parameter_is_named_and_a_denylisted_one_left_out():
  probe = parameters_doc.describe('parameters_doc_probe')
  assert [p.name for p in probe.parameters] == ['documented', 'undocumented']
  assert parameters_doc.undocumented([probe]) == ['parameters_doc_probe.undocumented']


def test_parameters_a_subclass_sets_itself_are_left_out_and_its_docstring_comes_first():
  probe = parameters_doc.describe('parameters_doc_probe_class')
  described = {p.name: (p.default, p.description) for p in probe.parameters}
  assert described == {'own': (4, "the subclass's own parameter."),
                       'inherited': (3, "the subclass's meaning.")}
  # The friendly errors' suggestions follow the same rule.
  assert configurables.parameters_of('parameters_doc_probe_class') == ['inherited', 'own']
  assert 'policy_model' not in configurables.parameters_of('PolicyGradientTrainer')
  assert 'q_value' not in configurables.parameters_of('SamplingAWR')
  assert 'q_value' in configurables.parameters_of('PPO')


def test_page_lists_each_configurable_with_its_defaults_and_required_parameters():
  page = parameters_doc.page()
  assert page.count('\n### ') == len(configurables.registered_names())
  default = inspect.signature(rl.experiment.train_rl).parameters['n_epochs'].default
  assert f'| `n_epochs` | `{default}` |' in page
  assert '| `trainer_class` | **required** |' in page
  assert '| `env` | **required** |' in page
  # Markdown that mkdocs would read as HTML or as more table cells is escaped.
  assert "'gymnax:&lt;id&gt;'" in page
  assert '| `task` |' not in page  # denylisted: the runner passes it


def _doc_command(*args):
  """`python -m rl.parameters_doc *args` called in this process, its output captured.

  Its main reads the package's registered configurables, which are the same in
  any process that imported rl.experiment (this one has), so a new process
  would add seconds of imports and check nothing more.
  """
  stdout, stderr = io.StringIO(), io.StringIO()
  with contextlib.chdir(ROOT), contextlib.redirect_stdout(stdout), \
      contextlib.redirect_stderr(stderr):
    try:
      status = parameters_doc.main(list(args))
    except SystemExit as e:  # argparse's errors
      status = e.code
  return subprocess.CompletedProcess(['rl.parameters_doc', *args], status, stdout.getvalue(),
                                     stderr.getvalue())


def test_check_fails_on_a_stale_page_and_writing_makes_it_current(tmp_path):
  page = tmp_path / 'parameters.md'
  page.write_text(parameters_doc.page().replace('| `n_envs` | `8` |', '| `n_envs` | `4` |'))
  stale = _doc_command('--check', f'--output={page}')
  assert stale.returncode == 1
  assert stale.stderr.strip() == (f'rl.parameters_doc: {page} is out of date: run '
                                  f'python -m rl.parameters_doc --output {page}')

  written = _doc_command(f'--output={page}')
  assert written.returncode == 0, written.stderr
  assert page.read_text() == parameters_doc.page()
  assert _doc_command('--check', f'--output={page}').returncode == 0


def test_an_unwritable_page_is_a_one_line_error(tmp_path):
  page = tmp_path / 'missing_folder' / 'parameters.md'
  result = _doc_command(f'--output={page}')
  assert_one_line_error(result, f'cannot write {page}', '--output')
  assert not page.parent.exists()


def test_without_griffe_it_says_which_package_to_install(monkeypatch, tmp_path):
  # A fresh copy of the module finds no griffe (a None entry in sys.modules makes its import
  # fail); the imported rl.parameters_doc is left as it is.
  monkeypatch.setitem(sys.modules, 'griffe', None)
  spec = importlib.util.find_spec('rl.parameters_doc')
  without_griffe = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(without_griffe)
  stderr = io.StringIO()
  with contextlib.redirect_stderr(stderr):
    # --check: were griffe found after all, it would write nothing.
    status = without_griffe.main(['--check', f'--output={tmp_path / "parameters.md"}'])
  result = subprocess.CompletedProcess([], status, '', stderr.getvalue())
  assert_one_line_error(result, 'griffe', 'pip install')


def test_a_configurable_in_no_area_is_named():
  stray = parameters_doc.Configurable('stray', 'elsewhere.stray', 'A stray.', ())
  with pytest.raises(ValueError, match=r'stray \(elsewhere\) is in none of the areas'):
    parameters_doc.render([stray])
