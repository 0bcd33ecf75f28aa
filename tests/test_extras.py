"""setup.py's extras: names pip finds as written, a short run of each env extra's config, and
the line a package of an extra says when it is absent or installed but failing to import.

A failing package is simulated by a finder first on sys.meta_path (in-process) or a stub
package first on PYTHONPATH (rl.run): either one's import raises the ImportError of a
missing dependency, as gymnax's does without six.
"""
import ast
import importlib
import importlib.abc
import importlib.util
import os
import sys

import pytest
from packaging.utils import canonicalize_name

from rl.envs import gymnax_envs
from rl.envs import packages
from rl.envs.task import RLTask
from rl.errors import ConfigError
from run_helpers import ROOT
from run_helpers import assert_one_line_error
from run_helpers import cli
from run_helpers import cli_process

ABSENT = 'rl_test_absent_dependency'


def setup_extras():
  """setup.py's extras_require, read from its source: extra -> its requirement strings."""
  with open(os.path.join(ROOT, 'setup.py'), encoding='utf-8') as f:
    tree = ast.parse(f.read())
  constants = {node.targets[0].id: ast.literal_eval(node.value) for node in tree.body
               if isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name)}
  call = next(node for node in ast.walk(tree) if isinstance(node, ast.Call)
              and getattr(node.func, 'id', None) == 'setup')
  extras = next(k.value for k in call.keywords if k.arg == 'extras_require')
  return {ast.literal_eval(key): (constants[value.id] if isinstance(value, ast.Name)
                                  else ast.literal_eval(value))
          for key, value in zip(extras.keys, extras.values)}


def test_every_extra_is_named_as_its_metadata_spells_it():
  # setuptools writes the PEP 685 normal form; pip 23.2 finds an extra only by it.
  extras = setup_extras()
  assert {'plots', 'ray', 'video', 'test', *packages.EXTRA_MODULES} <= set(extras)
  for name in extras:
    assert canonicalize_name(name) == name, name


def test_the_test_extra_installs_every_other_extra_by_its_name():
  extras = setup_extras()
  own = [r for r in extras['test'] if r.startswith('rl[')]
  assert len(own) == 1
  assert set(own[0][len('rl['):-1].split(',')) == set(extras) - {'test'}


def test_the_gymnax_extra_brings_six_which_gymnax_imports_undeclared():
  assert any(r.split('>')[0] == 'six' for r in setup_extras()['gymnax'])


# A 2-epoch run of a shipped config per env extra: run here (config, its trainer), or by the
# test named (module, test) where one runs it already.
CONFIG_RUNS = {
    'minatar': ('ppo_minatar_breakout.gin', 'PPO'),
    'mujoco': ('ppo_halfcheetah.gin', 'PPO'),
    'box2d': ('ppo_joint_lunarlander.gin', 'PPOJoint'),
}
RUNS_ELSEWHERE = {
    'gymnax': ('test_compiler', 'test_every_program_of_a_run_is_built_with_the_compiler_options'),
    'atari': ('test_frames', 'test_shipped_pong_ppo_joint_config_trains_on_stacks_and_resumes_exactly'),
}


def test_every_env_extra_has_a_two_epoch_run_in_the_suite():
  assert set(CONFIG_RUNS) | set(RUNS_ELSEWHERE) == set(packages.EXTRA_MODULES)
  for module, test in RUNS_ELSEWHERE.values():
    assert callable(getattr(importlib.import_module(module), test)), (module, test)


def tiny(trainer):
  """Bindings that shrink a shipped config of `trainer` to seconds an epoch."""
  if trainer == 'PPOJoint':
    steps = ['PPOJoint.batch_size = 8', 'PPOJoint.train_steps_per_epoch = 2']
  else:
    steps = [f'PPO.{net}_{setting}' for net in ('policy', 'value')
             for setting in ('batch_size = 8', 'train_steps_per_epoch = 2')]
  return ['train_rl.n_epochs = 2', 'RLTask.n_envs = 2', f'{trainer}.n_interactions_per_epoch = 32',
          f'{trainer}.added_policy_slice_length = 4', f'{trainer}.n_eval_episodes = 1',
          f'{trainer}.eval_every = 1', 'MLP.layer_widths = (8,)'] + steps


@pytest.mark.parametrize('extra', sorted(CONFIG_RUNS))
def test_a_shipped_config_of_the_extra_trains_two_epochs(tmp_path, extra):
  config, trainer = CONFIG_RUNS[extra]
  result = cli(f'--config_file=configs/{config}', f'--output_dir={tmp_path}/run',
               *(f'--config={b}' for b in tiny(trainer)))
  assert result.returncode == 0, result.stderr[-3000:]
  assert 'Training is done: 2 epochs' in result.stdout, result.stdout[-2000:]
  assert (tmp_path / 'run' / 'checkpoints' / '2').is_dir()


class _FailingImport(importlib.abc.MetaPathFinder, importlib.abc.Loader):
  """Finds `package` first; importing it imports a module that does not exist."""

  def __init__(self, package):
    self.package = package

  def find_spec(self, name, path=None, target=None):
    del path, target
    return importlib.util.spec_from_loader(name, self) if name == self.package else None

  def create_module(self, spec):
    return None

  def exec_module(self, module):
    importlib.import_module(ABSENT)


def failing_import(monkeypatch, package, *cached):
  """`package` is installed but fails to import; the modules `cached` (prefixes) are dropped."""
  monkeypatch.setattr(sys, 'meta_path', [_FailingImport(package), *sys.meta_path])
  for name in list(sys.modules):
    if name == package or name.startswith((package + '.', *cached)):
      monkeypatch.delitem(sys.modules, name)


def assert_installed_but_failing(error, package, extra):
  line = str(error.value).splitlines()[0]
  assert line.startswith(f"{package} is installed but cannot be imported: "
                         f"No module named '{ABSENT}'; "), line
  assert line.endswith(f"pip install '.[{extra}]'."), line


@pytest.mark.parametrize('env_id, package, cached, extra', [
    ('LunarLander-v3', 'Box2D', ('gymnasium.envs.box2d',), 'box2d'),
    ('HalfCheetah-v5', 'mujoco', ('gymnasium.envs.mujoco',), 'mujoco'),
    ('MinAtar/Breakout-v1', 'minatar', (), 'minatar'),
])
def test_an_installed_env_package_that_fails_to_import_says_why(monkeypatch, env_id, package,
                                                                 cached, extra):
  import gymnasium as gym  # pylint: disable=import-outside-toplevel
  # MinAtar's namespace unregistered, so that its first use imports the package.
  for key in [k for k, spec in gym.registry.items() if spec.namespace == 'MinAtar']:
    monkeypatch.delitem(gym.registry, key)
  failing_import(monkeypatch, package, *cached)
  with pytest.raises(ConfigError) as e:
    RLTask(env=env_id, n_envs=1)
  assert_installed_but_failing(e, package, extra)


def test_atari_preprocessing_with_a_failing_opencv_says_why(monkeypatch):
  failing_import(monkeypatch, 'cv2')
  with pytest.raises(ConfigError) as e:
    RLTask(env='ALE/Pong-v5', n_envs=1, atari_preprocessing=True)
  assert_installed_but_failing(e, 'cv2', 'atari')


def test_jax_native_envs_without_gymnax_name_the_gymnax_extra(monkeypatch):
  for name in [n for n in sys.modules if n == 'gymnax' or n.startswith('gymnax.')]:
    monkeypatch.delitem(sys.modules, name)
  monkeypatch.setitem(sys.modules, 'gymnax', None)  # as where it is not installed
  with pytest.raises(ConfigError) as e:
    gymnax_envs.make('gymnax:CartPole-v1')
  assert str(e.value) == ("env 'gymnax:CartPole-v1' needs gymnax, which is not installed; "
                          "install the gymnax extra: pip install '.[gymnax]'.")


def test_rl_run_says_why_an_installed_gymnax_cannot_be_imported(tmp_path, monkeypatch):
  # A stub gymnax ahead of the real one, whose import fails as gymnax's did without six.
  stub = tmp_path / 'stub' / 'gymnax'
  stub.mkdir(parents=True)
  (stub / '__init__.py').write_text(f'import {ABSENT}\n')
  monkeypatch.setenv('PYTHONPATH', os.pathsep.join([str(stub.parent), ROOT]))
  # A process: the stub comes first on its PYTHONPATH.
  result = cli_process('--config_file=configs/ppo_cartpole_jax.gin',
                       f'--output_dir={tmp_path}/run', '--config=train_rl.n_epochs=2')
  assert_one_line_error(result, f"gymnax is installed but cannot be imported: No module named "
                        f"'{ABSENT}'", "reinstall the gymnax extra", "pip install '.[gymnax]'")
  assert not (tmp_path / 'run').exists()
