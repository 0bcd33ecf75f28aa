"""launch.sweep's input: the grid, its folder names, and the flags and files it refuses.

The grid times the seeds in a stable order with readable, filesystem-safe
folder names (colliding names refused), grid values as gin bindings, bad sweep
files, the shipped sweep file and YAML floats; on the command line, bad input
and flags that would not act on a sweep exit 2 with one line, a misspelt
binding or a grid over a parameter the run passes itself fails the sweep before
any run, and --help describes each flag as it acts in a sweep.
"""
import os
import re

import pytest

from launch import grid
from launch.errors import SweepError
from run_helpers import REINFORCE
from run_helpers import ROOT
from sweep_helpers import cli
from sweep_helpers import free_port
from sweep_helpers import refusal


def test_expand_is_the_sorted_grid_times_seeds_with_readable_folders():
  runs = grid.expand({'RLTask.gamma': [0.99, 0.95], 'MLP.activation_fn': ['tanh']},
                          [0, 1])
  assert [r['folder'] for r in runs] == [
      'MLP.activation_fn=tanh,RLTask.gamma=0.99/seed_0',
      'MLP.activation_fn=tanh,RLTask.gamma=0.99/seed_1',
      'MLP.activation_fn=tanh,RLTask.gamma=0.95/seed_0',
      'MLP.activation_fn=tanh,RLTask.gamma=0.95/seed_1',
  ]
  assert runs[2]['bindings'] == {'MLP.activation_fn': 'tanh', 'RLTask.gamma': 0.95}
  assert runs[2]['seed'] == 0
  # The YAML order of the keys does not change the names.
  swapped = grid.expand({'MLP.activation_fn': ['tanh'], 'RLTask.gamma': [0.99, 0.95]},
                             [0, 1])
  assert [r['folder'] for r in swapped] == [r['folder'] for r in runs]


def test_folder_names_are_filesystem_safe_and_collisions_are_refused():
  name = grid.point_name({'policy/multifactor.constant': 1e-3, 'RLTask.env': 'a b/c'})
  assert name == 'RLTask.env=a_b_c,policy_multifactor.constant=0.001'
  long_name = grid.point_name({'A.b': 'x' * 500})
  assert len(long_name) <= grid.MAX_NAME
  assert long_name != grid.point_name({'A.b': 'x' * 499})
  with pytest.raises(SweepError, match='same folder'):
    grid.expand({'A.b': ['a b', 'a/b']}, [0])


def test_values_become_gin_bindings():
  bindings = {'A.s': 'CartPole-v1', 'A.i': 4, 'A.f': 0.95, 'A.t': True, 'A.r': '@Adam',
              'A.l': [64, 64]}
  assert grid.gin_bindings(bindings) == [
      "A.s = 'CartPole-v1'", 'A.i = 4', 'A.f = 0.95', 'A.t = True', 'A.r = @Adam',
      'A.l = (64, 64,)']


@pytest.mark.parametrize('sweep, match', [
    ({}, 'must map'),
    ({'RLTask.gamma': 0.9}, 'non-empty list'),
    ({'RLTask.gamma': []}, 'non-empty list'),
    ({'gamma': [0.9]}, 'not a gin binding name'),
    ({'RLTask.seed': [1, 2]}, '--seeds'),
    ({'RLTask.gamma': [{'a': 1}]}, 'not a number'),
])
def test_bad_sweeps_are_refused(sweep, match):
  with pytest.raises(SweepError, match=match):
    grid.validate_sweep(sweep)


def test_shipped_sweep_file_and_yaml_floats(tmp_path):
  runs = grid.expand(
      grid.load_sweep(os.path.join(ROOT, 'configs', 'sweeps', 'ppo_cartpole_sweep.yaml')),
      [0])
  assert [r['folder'] for r in runs] == ['RLTask.gamma=0.99/seed_0', 'RLTask.gamma=0.95/seed_0']
  path = tmp_path / 'lr.yaml'
  path.write_text('A.lr: [1e-3, 2.5e+1]\n')  # YAML 1.1 would read these as strings
  assert grid.load_sweep(str(path)) == {'A.lr': [0.001, 25.0]}


def test_bad_input_exits_2_with_one_line(tmp_path):
  bad = tmp_path / 'bad.yaml'
  bad.write_text('RLTask.gamma: 0.9\n')
  good = tmp_path / 'good.yaml'
  good.write_text('RLTask.gamma: [0.9]\n')
  base = [f'--config_file={REINFORCE}', f'--output_dir={tmp_path / "o"}']
  # The Ray backend refuses these before it starts or joins Ray (it imports ray only).
  for args, message in [([f'--sweep={bad}'], 'non-empty list'),
                        ([f'--sweep={good}', '--ray_address=auto'],
                         '--ray_address applies only to --backend=ray'),
                        # Nothing listens on a port just freed: refused at once, not after
                        # Ray's minutes of retries.
                        ([f'--sweep={good}', '--backend=ray',
                          f'--ray_address=127.0.0.1:{free_port()}'],
                         'cannot reach a Ray cluster'),
                        ([f'--sweep={good}', '--backend=ray', '--ray_num_cpus=0'],
                         '--ray_num_cpus must be > 0')]:
    assert_refused(refusal(*base, *args), message)
    assert not os.path.exists(tmp_path / 'o')


def assert_refused(result, message):
  """The sweep refused its input with one line naming `message`, exit status 2."""
  assert result.returncode == 2, (result.args, result.stderr)
  lines = result.stderr.strip().splitlines()
  assert len(lines) == 1 and lines[0].startswith('launch.sweep: error:'), result.stderr
  assert message in lines[0], lines[0]


def test_flags_that_would_not_act_on_a_sweep_are_refused(tmp_path):
  """rl.run's --seed, or a flag of a module the runs use, is refused rather than ignored."""
  grid = tmp_path / 'grid.yaml'
  grid.write_text('RLTask.gamma: [0.9]\n')
  base = [f'--config_file={REINFORCE}', f'--sweep={grid}', f'--output_dir={tmp_path / "o"}']
  assert_refused(refusal(*base, '--seed=5'), '--seeds=5')
  # orbax defines this flag; the sweep does not import orbax (rl.data.checkpoints
  # loads it at the first checkpoint), so it is an unknown flag here.
  assert_refused(cli(*base, '--experimental_orbax_use_distributed_barrier'),
                 "flag 'experimental_orbax_use_distributed_barrier'")
  assert not os.path.exists(tmp_path / 'o')


def help_entries(text):
  """{flag name: its description on one line} of absl's --help or --helpfull text."""
  entries = {}
  name = None
  for line in text.splitlines():
    m = re.match(r'  (?:-.,)?--(?:\[no\])?(\w+): ?(.*)', line)
    if m:
      name = m.group(1)
      entries[name] = m.group(2)
    elif name is not None and line.startswith('    '):
      entries[name] += ' ' + line.strip()
    else:
      name = None
  return entries


def test_help_describes_every_flag_as_it_acts_in_a_sweep():
  result = cli('--help')  # absl's help exits with status 1
  entries = help_entries(result.stdout)
  assert {'config_file', 'config', 'output_dir', 'allow_config_change', 'seed', 'sweep',
          'seeds', 'parallel', 'backend', 'ray_address', 'ray_num_cpus',
          'ray_num_gpus'} <= set(entries), sorted(entries)
  assert 'every run' in entries['config_file']
  assert 'every run' in entries['config']
  assert entries['output_dir'].startswith('The sweep folder')
  assert 'every run' in entries['allow_config_change']
  assert entries['seed'].startswith('Refused') and '--seeds' in entries['seed']
  # --helpfull lists them once, with the sweep's text, not as rl.run's single-run flags.
  full = cli('--helpfull')
  assert help_entries(full.stdout)['output_dir'] == entries['output_dir']
  assert 'The run folder' not in full.stdout and 'Overrides RLTask.seed' not in full.stdout


def test_a_config_typo_fails_the_sweep_up_front(tmp_path):
  grid = tmp_path / 'grid.yaml'
  grid.write_text('RLTask.gama: [0.9, 0.8]\n')
  result = refusal(f'--config_file={REINFORCE}', f'--sweep={grid}',
                   f'--output_dir={tmp_path / "o"}')
  assert result.returncode == 2
  assert result.stderr.strip().splitlines() == [
      "launch.sweep: error: grid point RLTask.gama=0.9: 'RLTask' has no parameter 'gama'. "
      "Did you mean 'gamma'? Fix the binding's parameter name."]
  assert not os.path.exists(tmp_path / 'o')


def test_a_grid_over_a_parameter_the_run_passes_itself_is_refused_up_front(tmp_path):
  # Every point would train alike: the trainers build the optimizer with their schedule's rate.
  grid = tmp_path / 'grid.yaml'
  grid.write_text('Adam.learning_rate: [0.1, 0.0001]\n')
  result = refusal(f"--config_file={os.path.join(ROOT, 'configs', 'ppo_cartpole.gin')}",
                   f'--sweep={grid}', f'--output_dir={tmp_path / "o"}')
  assert result.returncode == 2
  [line] = result.stderr.strip().splitlines()
  assert line.startswith('launch.sweep: error: grid point Adam.learning_rate=0.1: '
                         'Adam.learning_rate = 0.1 has no effect'), line
  assert 'PPO.policy_lr_schedule = @policy/multifactor' in line
  assert not os.path.exists(tmp_path / 'o')
