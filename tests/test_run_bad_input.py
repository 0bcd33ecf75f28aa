"""Bad command lines fail in one line on stderr, exit status 2, and write no folder.

An unknown env id (with suggestions from its own namespace only), an env
whose package is missing (with the install command), an observation space no
trainer handles, a missing config file, no arguments at all, a config file
given without --config_file, a misspelt or ill-typed flag of rl.run, and a
misspelt flag of rl.evaluate and launch.sweep.
"""
import pytest

import in_process
from run_helpers import REINFORCE
from run_helpers import assert_one_line_error
from run_helpers import cli
from run_helpers import cli_process


@pytest.mark.parametrize('env_id, needles', [
    # A namespace that its package registers on first use: ids of that namespace
    # only (tests/test_envs.py covers the package missing).
    ('ALE/Pongg-v5', ["Did you mean 'ALE/Pong-v5'"]),
    ('MinAtar/Breakot-v1', ["Did you mean 'MinAtar/Breakout-v1'"]),
    # No namespace: suggestions stay among the ids without one, by name.
    ('CartPol-v1', ["Did you mean 'CartPole-v1'"]),
])
def test_cli_unknown_env_suggests_only_its_own_namespace(tmp_path, env_id, needles):
  out = tmp_path / 'x'
  result = cli(f'--config_file={REINFORCE}', f"--config=RLTask.env = '{env_id}'",
               f'--output_dir={out}')
  assert_one_line_error(result, f'{env_id!r}', *needles)
  assert 'Ant-v5' not in result.stderr and 'phys2d/' not in result.stderr
  assert result.returncode == 2
  assert not out.exists()


def missing_dependency_envs():
  """The fake env of tests/missing_dependency_env.py, and gymnasium's own where it applies."""
  fake = pytest.param(['import tests.missing_dependency_env',
                       "RLTask.env = 'rl_test/NeedsMissingPackage-v0'"],
                      'rl_test/NeedsMissingPackage-v0',
                      'pip install "gymnasium[rl-test-missing]"', id='fake')
  try:
    import Box2D  # pylint: disable=import-outside-toplevel,unused-import
    box2d = pytest.param(None, None, None, id='LunarLander-v3',
                         marks=pytest.mark.skip(reason='box2d is installed here'))
  except ImportError:
    box2d = pytest.param(["RLTask.env = 'LunarLander-v3'"], 'LunarLander-v3',
                         "pip install '.[box2d]'", id='LunarLander-v3')
  return [fake, box2d]


@pytest.mark.parametrize('bindings, env_id, install', missing_dependency_envs())
def test_cli_env_with_a_missing_package_names_the_install_command(tmp_path, bindings, env_id,
                                                                    install):
  out = tmp_path / 'x'
  result = cli(f'--config_file={REINFORCE}', *[f'--config={b}' for b in bindings],
               f'--output_dir={out}')
  assert_one_line_error(result, f'{env_id!r}', 'not installed', install)
  assert 'Traceback' not in result.stderr
  assert result.returncode == 2
  assert not out.exists()


def test_cli_unsupported_observation_space_is_named(tmp_path):
  out = tmp_path / 'x'
  result = cli(f'--config_file={REINFORCE}', "--config=RLTask.env = 'Blackjack-v1'",
               f'--output_dir={out}')
  assert_one_line_error(result, "'Blackjack-v1'", 'observation space Tuple(', 'Box', 'Discrete')
  assert 'check the types of its gin bindings' not in result.stderr
  assert result.returncode == 2
  assert not out.exists()


def test_cli_missing_config_file(tmp_path):
  result = cli('--config_file=configs/nope.gin', f'--output_dir={tmp_path / "x"}')
  assert_one_line_error(result, 'configs/nope.gin', 'does not exist')


def test_cli_without_arguments_says_what_works():
  result = cli()
  assert_one_line_error(result, '--config_file=', 'to start a run', '--output_dir=',
                        'to resume one')
  assert result.returncode == 2


@pytest.mark.parametrize('stray', ['configs/ppo_cartpole.gin', 'configs/mine.gin', 'README.md'])
def test_cli_config_file_without_the_flag_points_to_it(tmp_path, stray):
  out = tmp_path / 'x'
  result = cli(stray, f'--output_dir={out}')
  assert_one_line_error(result, f"'{stray}'", f'--config_file={stray}')
  assert result.returncode == 2
  assert not out.exists()


@pytest.mark.parametrize('flag, needles', [
    ('--confg_file=x', ["Unknown command line flag 'confg_file'", 'Did you mean: config_file']),
    ('--seed=abc', ['--seed=abc', '--seed takes int values']),
])
def test_cli_bad_flag_is_one_line_and_exit_2(tmp_path, flag, needles):
  out = tmp_path / 'x'
  result = cli(flag, f'--config_file={REINFORCE}', f'--output_dir={out}')
  assert_one_line_error(result, *needles, '--helpshort')
  assert result.returncode == 2
  assert not out.exists()


@pytest.mark.parametrize('module,flag,known', [
    ('rl.evaluate', '--outptu_dir=x', 'output_dir'),
    ('launch.sweep', '--sweeep=x.yaml', 'sweep'),
])
def test_misspelt_flag_of_the_other_commands_is_one_line_and_exit_2(module, flag, known):
  result = in_process.run(flag, program=module)
  assert_one_line_error(result, f'{module}: error:', known, '--helpshort')
  assert result.returncode == 2


def test_helpshort_speaks_to_users():
  """--helpshort shows what the command does and its exits, not notes on its module's code."""
  result = cli_process('--helpshort')  # absl's help flags exit with status 1
  usage = result.stdout.split('\nflags:')[0]
  assert usage.startswith('Trains an agent: `python -m rl.run --config_file=X.gin')
  assert 'Ctrl-C with\n130 and SIGTERM with 143' in usage
  for note in ('this module', 'imports', 'rl.experiment', 'rl.console'):
    assert note not in usage
