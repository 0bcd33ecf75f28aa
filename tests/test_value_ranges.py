"""Values outside the range their maths needs stop the run in one line (rl.ranges).

And gin's own errors in the same form: a number bound to a tuple parameter, a
misspelt reference, a configurable's name in the wrong case, a type error deep
inside the build.
"""
import os

import gin
import pytest

from rl import config as config_lib
from rl import configurables
from rl import experiment
from rl import ranges
from rl.errors import ConfigError
from run_helpers import ROOT
from run_helpers import assert_one_line_error
from run_helpers import cli

PPO = os.path.join(ROOT, 'configs', 'ppo_cartpole.gin')


@pytest.mark.parametrize('binding, message', [
    ('RLTask.gamma = 2', 'RLTask.gamma = 2 is out of range: it must be in [0, 1] (a discount '
                         'factor); bind a value in [0, 1], e.g. RLTask.gamma = 0.99.'),
    ('gae.lambda_ = 1.5', 'gae.lambda_ = 1.5 is out of range: it must be in [0, 1]; bind a value '
                          'in [0, 1], e.g. gae.lambda_ = 0.95.'),
    ('PPO.epsilon = -1', 'PPO.epsilon = -1 is out of range: it must be > 0 (a clip range of the '
                         'probability ratio); bind a value > 0, e.g. PPO.epsilon = 0.2.'),
    ('PPO.policy_batch_size = 100000',
     'PPO.policy_batch_size = 100000 is larger than the 256 env steps its batches are drawn '
     'from (PPO.n_interactions_per_epoch = 256), so a batch would repeat steps; bind '
     'PPO.policy_batch_size <= 256 or collect more steps per epoch.'),
    ('policy/multifactor.steps_per_cycle = 0',
     'policy/multifactor.steps_per_cycle = 0 is out of range: it must be >= 1; bind a value '
     '>= 1, e.g. policy/multifactor.steps_per_cycle = 100000.'),
    ('Adam.b2 = 1.0', 'Adam.b2 = 1.0 is out of range: it must be in [0, 1); bind a value in '
                      '[0, 1), e.g. Adam.b2 = 0.999.'),
    ('PPO.eval_every = 0', 'PPO.eval_every = 0 is out of range: it must be >= 1; bind a value '
                           '>= 1, e.g. PPO.eval_every = 1.'),
    ('MLP.layer_widths = (64, 0)', 'MLP.layer_widths = (64, 0) has a layer of fewer than one '
                                   'unit; give every layer >= 1, e.g. MLP.layer_widths = (64, 64).'),
    # gin's errors, in the same form.
    ('MLP.layer_widths = 64', 'MLP.layer_widths takes a tuple, got 64 (a single number). Did '
                              'you mean MLP.layer_widths = (64,)?'),
    ('PPO.policy_lr_schedule = @multifactr',
     "unknown configurable '@multifactr' in a reference of the gin config. Did you mean "
     "'@multifactor'? Check the reference's spelling."),
    ('PPO.value_lr_schedule = @value/multifactr',
     "unknown configurable '@value/multifactr' in a reference of the gin config. Did you mean "
     "'@value/multifactor'? Check the reference's spelling."),
    ('ppo.epsilon = 0.1', "unknown configurable 'ppo' in the gin config. Did you mean 'PPO'? "
                          "Check the binding's spelling."),
])
def test_a_bad_value_is_one_line_naming_binding_range_and_fix(tmp_path, binding, message):
  out = tmp_path / 'run'
  with pytest.raises(ConfigError) as info:
    experiment.execute([PPO], [binding, 'train_rl.n_epochs = 1'], str(out))
  assert str(info.value) == message
  assert not out.exists()


def test_scaled_value_targets_refuse_a_discount_of_one(tmp_path):
  bindings = ['RLTask.gamma = 1.0', 'PPO.scale_value_targets = True', 'train_rl.n_epochs = 1']
  with pytest.raises(ConfigError) as info:
    experiment.execute([PPO], bindings, str(tmp_path / 'run'))
  assert str(info.value) == (
      'PPO.scale_value_targets divides the value targets by 1 - RLTask.gamma, which is 0 at '
      'RLTask.gamma = 1.0; bind RLTask.gamma < 1 or PPO.scale_value_targets = False.')
  # Without the scaling a discount of 1 is in range.
  experiment.execute([PPO], ['RLTask.gamma = 1.0', 'train_rl.n_epochs = 0'],
                     str(tmp_path / 'unscaled'))


def test_the_command_line_exits_2_and_writes_nothing(tmp_path):
  out = tmp_path / 'run'
  result = cli(f'--config_file={PPO}', '--config=RLTask.gamma = 2', f'--output_dir={out}')
  assert result.returncode == 2
  assert_one_line_error(result, 'RLTask.gamma = 2 is out of range')
  assert not out.exists()


def test_range_ends_open_and_closed():
  ranges.in_range('x.p', 0, low=0)
  ranges.in_range('x.p', 1, high=1)
  ranges.in_range('x.p', None, low=1)  # unset
  ranges.in_range('x.p', lambda step: 0.1, low=0, low_open=True)  # a schedule, not a number
  for value, kwargs in ((0, dict(low=0, low_open=True)), (1, dict(high=1, high_open=True)),
                        (float('nan'), dict(low=0)), (-0.5, dict(low=0, high=1))):
    with pytest.raises(ConfigError, match='is out of range'):
      ranges.in_range('x.p', value, **kwargs)
  assert ranges.range_text(0, 1, low_open=True) == 'in (0, 1]'
  assert ranges.range_text(None, 1, high_open=True) == '< 1'


@gin.configurable('ranges_test_inner')
def _inner(widths=3):
  return len(widths)


@gin.configurable('ranges_test_outer')
def _outer(inner=_inner):
  return inner()


def test_a_type_error_deep_in_the_build_names_the_configurable_and_its_bindings():
  gin.clear_config()
  try:
    gin.parse_config(['ranges_test_outer.inner = @ranges_test_inner',
                      'ranges_test_inner.widths = 3'])
    with pytest.raises(ConfigError) as info:
      config_lib.construct(_outer)
    assert str(info.value) == ("cannot build ranges_test_inner: object of type 'int' has no "
                               'len() (check the types of its gin bindings: '
                               'ranges_test_inner.widths = 3).')
  finally:
    gin.clear_config()


@pytest.mark.parametrize('config, binding, message', [
    ('sac_pendulum.gin', 'SAC.tau = 2',
     'SAC.tau = 2 is out of range: it must be in (0, 1] (the step of the target networks toward '
     'the trained ones); bind a value in (0, 1], e.g. SAC.tau = 0.005.'),
    ('td3_pendulum.gin', 'TD3.policy_delay = 0',
     'TD3.policy_delay = 0 is out of range: it must be >= 1; bind a value >= 1, e.g. '
     'TD3.policy_delay = 2.'),
])
def test_off_policy_ranges_are_one_line_each(tmp_path, config, binding, message):
  out = tmp_path / 'run'
  with pytest.raises(ConfigError) as info:
    experiment.execute([os.path.join(ROOT, 'configs', config)],
                       [binding, 'train_rl.n_epochs = 1'], str(out))
  assert str(info.value) == message
  assert not out.exists()
