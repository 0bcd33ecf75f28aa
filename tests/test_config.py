"""The gin configuration layer: includes, one-line errors for bad bindings, config differences."""
import os
import subprocess
import sys

import gin
import pytest

from rl import config as config_lib
from rl import configurables
from rl import experiment
from rl.errors import ConfigError
from run_helpers import REINFORCE
from run_helpers import ROOT
from run_helpers import TINY
from run_helpers import assert_one_line_error
from run_helpers import cli


def test_cli_unknown_configurable_suggests_the_closest(tmp_path):
  out = tmp_path / 'x'
  result = cli(f'--config_file={REINFORCE}', '--config=RLTaks.gamma = 0.9', f'--output_dir={out}')
  assert_one_line_error(result, "'RLTaks'", "Did you mean 'RLTask'")
  assert not out.exists()


def without_binding(tmp_path, name):
  """A copy of the REINFORCE config lacking the binding of `name`."""
  config = tmp_path / 'partial.gin'
  with open(REINFORCE) as f:
    config.write_text(''.join(line for line in f if not line.startswith(name + ' ')))
  return config


@pytest.mark.parametrize('name, in_file, in_flag', [
    ('RLTask.env', "RLTask.env = 'CartPole-v1'", "RLTask.env='CartPole-v1'"),
    ('train_rl.trainer_class', 'train_rl.trainer_class = @PPO', 'train_rl.trainer_class=@PPO'),
])
def test_cli_missing_required_binding_names_it_and_how_to_give_it(tmp_path, name, in_file,
                                                                   in_flag):
  out = tmp_path / 'x'
  result = cli(f'--config_file={without_binding(tmp_path, name)}', f'--output_dir={out}')
  assert_one_line_error(result, f'{name} is required', f'add e.g. {in_file} to the config file',
                        f'--config "{in_flag}"')
  assert result.returncode == 2
  assert not out.exists()


def test_config_difference_ignores_defaults_and_what_a_saved_config_leaves_out():
  old = "RLTask.gamma = 0.9\ngae.lambda_ = 0.8\nRLTask.n_envs = 4\n"
  new = "RLTask.gamma = 0.9\nRLTask.max_steps = None\nRLTask.n_envs = 4\nRLTask.seed = 0\n"
  # A binding set to its parameter's default equals no binding.
  assert config_lib.config_difference(old, new) == ['gae.lambda_: 0.8 -> (unset)']
  # A run's saved (operative) config lists every binding the run used, so a
  # binding it lacks was never used.
  assert config_lib.config_difference(old, new, new_is_operative=True) == []
  assert config_lib.config_difference(old, new.replace('= 4', '= 2'), new_is_operative=True) == [
      'RLTask.n_envs: 4 -> 2']
  # Another value than the default is a difference.
  assert config_lib.config_difference(old, new + 'RLTask.seed = 1\n', new_is_operative=True) == [
      'RLTask.seed: (unset) -> 1']


@pytest.mark.parametrize('binding, quoted', [
    ('PPO.epsilon=abc', "PPO.epsilon='abc'"),
    # What the shell leaves of --config RLTask.env='Pendulum-v1' without outer quotes.
    ('RLTask.env=Pendulum-v1', "RLTask.env='Pendulum-v1'"),
    ('RLTask.env = Pendulum-v1', "RLTask.env='Pendulum-v1'"),
])
def test_cli_unquoted_string_shows_the_quoted_form(tmp_path, binding, quoted):
  out = tmp_path / 'x'
  result = cli(f'--config_file={REINFORCE}', '--config', binding, f'--output_dir={out}')
  assert_one_line_error(result, 'is not a Python literal', f'{quoted}',
                        f'--config "{quoted}"')
  assert 'ast.Name' not in result.stderr
  assert result.returncode == 2
  assert not out.exists()


def test_cli_unquoted_string_in_a_config_file_names_the_file_and_line(tmp_path):
  config = tmp_path / 'mine.gin'
  config.write_text('RLTask.n_envs = 2\nRLTask.env = Pendulum-v1\n')
  out = tmp_path / 'x'
  result = cli(f'--config_file={REINFORCE}', f'--config_file={config}', f'--output_dir={out}')
  assert_one_line_error(result, f'{config}, line 2', 'is not a Python literal',
                        "RLTask.env = 'Pendulum-v1'")
  assert result.returncode == 2
  assert not out.exists()


def test_cli_include_resolves_against_the_including_file(tmp_path):
  """`include` finds the file beside the one that includes it, from any working directory."""
  configs = tmp_path / 'configs'
  (configs / 'base').mkdir(parents=True)
  (configs / 'base' / 'tiny.gin').write_text('\n'.join(TINY) + '\n')
  (configs / 'base' / 'reinforce.gin').write_text(f"include {REINFORCE!r}\ninclude 'tiny.gin'\n")
  (configs / 'x.gin').write_text("include 'base/reinforce.gin'\ntrain_rl.n_epochs = 0\n"
                                 'RLTask.gamma = 0.9\n')
  elsewhere = tmp_path / 'elsewhere'
  elsewhere.mkdir()
  pythonpath = os.pathsep.join(filter(None, [ROOT, os.environ.get('PYTHONPATH')]))
  result = subprocess.run(
      [sys.executable, '-m', 'rl.run', '--config_file=../configs/x.gin', '--output_dir=out'],
      cwd=elsewhere, env=dict(os.environ, PYTHONPATH=pythonpath), capture_output=True,
      text=True, timeout=240)
  assert result.returncode == 0, result.stderr
  operative = (elsewhere / 'out' / 'config.gin').read_text()
  assert 'PolicyGradientTrainer.batch_size = 64' in operative  # from base/tiny.gin
  assert 'RLTask.gamma = 0.9' in operative


def test_include_relative_to_the_working_directory_still_works(tmp_path, monkeypatch):
  config = tmp_path / 'x.gin'
  config.write_text("include 'configs/reinforce_cartpole.gin'\nRLTask.gamma = 0.9\n")
  monkeypatch.chdir(ROOT)
  config_lib.parse_config([str(config)], [])
  assert gin.query_parameter('RLTask.env') == 'CartPole-v1'
  assert gin.query_parameter('RLTask.gamma') == 0.9


def test_missing_include_is_one_line_naming_both_files(tmp_path):
  config = tmp_path / 'x.gin'
  config.write_text("RLTask.gamma = 0.9\ninclude 'base.gin'\n")
  with pytest.raises(ConfigError) as info:
    config_lib.parse_config([str(config)], [])
  message = str(info.value)
  assert '\n' not in message
  assert "'base.gin'" in message and f'{config}' in message and 'does not exist' in message


@pytest.mark.parametrize('binding, needles', [
    ('RLTask.gama = 0.9', ["'RLTask' has no parameter 'gama'", "Did you mean 'gamma'"]),
    ('PolicyGradientTrainer.n_eval_episdoes = 3', ["Did you mean 'n_eval_episodes'"]),
    ("RLTask.env_kwargs = 3", ['cannot build RLTask']),
    # REINFORCE passes its policy's batch size to its base itself.
    ('PolicyGradientTrainer.policy_batch_size = 3',
     ['PolicyGradientTrainer sets policy_batch_size itself, so it cannot be bound']),
    ("RLTask.env = 'CartPol-v1'", ["unknown env id 'CartPol-v1'", "Did you mean 'CartPole-v1'"]),
    ("RLTask.env = 'rl_test/TupleAction-v0'", ['PolicyGradientTrainer cannot act',
                                               'not supported']),
    ('PolicyGradientTrainer.n_interactions_per_epoch = 100',
     ['exactly one of n_trajectories_per_epoch']),
    ("multifactor.factors = 'constant * warmupp'", ["warmupp"]),
    # Integer parameters refuse floats and bools instead of truncating them.
    ('train_rl.n_epochs = 2.5', ['train_rl.n_epochs must be an integer, got 2.5',
                                 'train_rl.n_epochs = 2']),
    ('RLTask.n_envs = True', ['RLTask.n_envs must be an integer, got True (a bool)']),
    ('RLTask.seed = 1.5', ['RLTask.seed must be an integer']),
    ('RLTask.max_steps = 100.0', ['RLTask.max_steps must be an integer']),
    ('PolicyGradientTrainer.batch_size = 64.0', ['PolicyGradientTrainer.batch_size must be']),
    ('PolicyGradientTrainer.n_trajectories_per_epoch = 4.5',
     ['PolicyGradientTrainer.n_trajectories_per_epoch must be an integer']),
    ('policy/multifactor.warmup_steps = 1e3', ['policy/multifactor.warmup_steps must be',
                                               'warmup_steps = 1000']),
    # Numeric parameters refuse strings instead of converting them somewhere, or not.
    ("train_rl.n_epochs = '3'", ["train_rl.n_epochs must be an integer, got '3' (a string)",
                                 'train_rl.n_epochs = 3']),
    ("RLTask.n_envs = 'many'", ["RLTask.n_envs must be an integer, got 'many' (a string)",
                                'RLTask.n_envs = 8']),
    ("PolicyGradientTrainer.n_trajectories_per_epoch = '4'",
     ['PolicyGradientTrainer.n_trajectories_per_epoch must be an integer, got',
      'PolicyGradientTrainer.n_trajectories_per_epoch = 4']),
    ("RLTask.gamma = '0.9'", ["RLTask.gamma must be a number, got '0.9' (a string)",
                              'RLTask.gamma = 0.9']),
    ("multifactor.constant = 'high'", ["multifactor.constant must be a number, got 'high'"]),
])
def test_bad_config_is_one_clear_line_and_writes_nothing(tmp_path, binding, needles):
  out = tmp_path / 'x'
  with pytest.raises(ConfigError) as info:
    experiment.execute([REINFORCE], TINY + [binding], str(out))
  message = str(info.value)
  assert '\n' not in message
  for needle in needles:
    assert needle in message
  assert not out.exists()


@pytest.mark.parametrize('error', [ValueError, KeyError, AttributeError, IndexError])
def test_a_bug_while_building_is_not_reported_as_a_config_error(error):
  """Only errors that come from the config become one-line ConfigErrors.

  A KeyError or ValueError raised by the code itself is a bug; reporting it as
  a bad gin binding would send the user looking in the wrong place.
  """
  class Broken:
    def __init__(self):
      raise error('a bug in the code, not in the config')

  with pytest.raises(error):
    config_lib.construct(Broken)


def test_includes_that_form_a_circle_are_one_line(tmp_path):
  (tmp_path / 'a.gin').write_text("include 'b.gin'\n")
  (tmp_path / 'b.gin').write_text("RLTask.gamma = 0.9\ninclude 'a.gin'\n")
  with pytest.raises(ConfigError) as info:
    config_lib.parse_config([str(tmp_path / 'a.gin')], [])
  message = str(info.value)
  assert '\n' not in message
  assert 'include each other in a circle' in message and 'b.gin' in message


def test_an_error_around_an_include_names_its_own_file_and_line(tmp_path):
  """Each file's lines keep their numbers, before and after an include."""
  (tmp_path / 'base.gin').write_text('RLTask.n_envs = 2\n\nRLTask.env = CartPole-v1\n')
  outer = tmp_path / 'x.gin'
  outer.write_text("RLTask.gamma = 0.9\ninclude 'base.gin'\n")
  with pytest.raises(ConfigError, match=rf"{tmp_path / 'base.gin'}, line 3: CartPole-v1"):
    config_lib.parse_config([str(outer)], [])
  (tmp_path / 'base.gin').write_text('RLTask.n_envs = 2\n')
  outer.write_text("include 'base.gin'\n# a comment\nRLTask.env = Pendulum-v1\n")
  with pytest.raises(ConfigError, match=rf'{outer}, line 3: Pendulum-v1'):
    config_lib.parse_config([str(outer)], [])


def test_bindings_after_an_include_override_it_and_before_it_are_overridden(tmp_path):
  (tmp_path / 'base.gin').write_text('RLTask.gamma = 0.5\nRLTask.n_envs = 3\n')
  outer = tmp_path / 'x.gin'
  outer.write_text("RLTask.gamma = 0.7\nRLTask.n_envs = 5\ninclude 'base.gin'\n"
                   'RLTask.n_envs = 6\n')
  gin.clear_config()
  try:
    config_lib.parse_config([str(outer)], [])
    assert gin.query_parameter('RLTask.gamma') == 0.5
    assert gin.query_parameter('RLTask.n_envs') == 6
  finally:
    gin.clear_config()


def test_registered_names_include_those_given_apart_from_the_python_name():
  names = configurables.registered_names()
  # @gin.configurable('compiler') on compiler.configure, ('gae') on a function, classes.
  assert {'compiler', 'gae', 'Gaussian', 'RLTask', 'PPO', 'train_rl', 'Adam'} <= set(names)
  assert 'configure' not in names


def test_unknown_configurable_suggests_a_name_given_apart_from_the_python_name():
  with pytest.raises(ConfigError, match="unknown configurable 'compilr'.*Did you mean 'compiler'"):
    config_lib.parse_config([], ['compilr.fast_compile = False'])
