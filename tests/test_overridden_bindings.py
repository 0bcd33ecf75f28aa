"""A binding takes effect or is refused: parameters that the run's code passes itself.

The trainers build their optimizers with the learning rate of their schedule
and their advantage estimators with RLTask.gamma; gin lets those explicit
arguments win over a binding. rl.overridden finds such bindings in gin's
operative config and refuses them before anything is written, naming the
binding that controls the value where the code declares it.
"""
import os

import gin
import pytest

from rl import config as config_lib
from rl import configurables
from rl import experiment
from rl import overridden
from rl.errors import ConfigError
from run_helpers import ROOT
from run_helpers import assert_one_line_error
from run_helpers import cli

PPO = os.path.join(ROOT, 'configs', 'ppo_cartpole.gin')


def test_an_optimizers_learning_rate_is_refused_naming_the_schedule(tmp_path):
  out = tmp_path / 'run'
  result = cli(f'--config_file={PPO}', '--config=Adam.learning_rate=0.5',
               '--config=train_rl.n_epochs=1', f'--output_dir={out}')
  assert result.returncode == 2
  assert_one_line_error(
      result, 'Adam.learning_rate = 0.5 has no effect',
      'PPO.policy_lr_schedule = @policy/multifactor',
      'PPO.value_lr_schedule = @value/multifactor', 'e.g. policy/multifactor.constant')
  assert not out.exists()


@pytest.mark.parametrize('binding, needles', [
    ('gae.gamma = 0.5', ['gae.gamma = 0.5 has no effect', 'from RLTask.gamma']),
    ('gae.margin = 3', ['gae.margin = 3 has no effect', 'added_policy_slice_length']),
])
def test_an_estimators_inputs_are_refused_naming_what_sets_them(tmp_path, binding, needles):
  out = tmp_path / 'run'
  with pytest.raises(ConfigError) as info:
    experiment.execute([PPO], [binding, 'train_rl.n_epochs = 0'], str(out))
  message = str(info.value)
  assert '\n' not in message
  for needle in needles:
    assert needle in message, message
  assert not out.exists()


@gin.configurable('overridden_test_inner')
def _inner(rate=1.0, width=2):
  return rate, width


@gin.configurable('overridden_test_outer')
def _outer(inner=_inner):
  return inner(rate=0.25)  # passes rate itself, as the trainers pass an optimizer's rate


def test_any_parameter_the_caller_passes_is_found_with_a_generic_line():
  gin.clear_config()
  try:
    gin.parse_config(['overridden_test_inner.rate = 0.5', 'overridden_test_inner.width = 3',
                      'overridden_test_outer.inner = @overridden_test_inner'])
    assert config_lib.construct(_outer) == (0.25, 3)
    assert overridden.overridden_bindings() == [('overridden_test_inner.rate', '0.5')]
    # A resume compares its config with the checkpoint's without such keys, either side's.
    assert overridden.overridden_keys('overridden_test_inner.rate = 0.1\n') == {
        'overridden_test_inner.rate'}
    with pytest.raises(ConfigError) as info:
      overridden.check_run()
    assert str(info.value) == (
        'overridden_test_inner.rate = 0.5 has no effect: the code that calls '
        'overridden_test_inner passes rate itself, which overrides the binding; remove '
        'overridden_test_inner.rate, and set the value where that caller takes it.')
  finally:
    gin.clear_config()


def test_an_unscoped_binding_reaches_a_scoped_call_and_is_neither_unused_nor_overridden():
  gin.clear_config()
  try:
    gin.parse_config(['overridden_test_inner.width = 3',
                      'overridden_test_outer.inner = @scope/overridden_test_inner'])
    config_lib.construct(_outer)
    assert config_lib.unused_bindings() == []
    assert overridden.overridden_bindings() == []
    assert config_lib.reaches('a/sel', 'a/b/sel') and config_lib.reaches('sel', 'a/sel')
    assert not config_lib.reaches('b/sel', 'a/b/sel') and not config_lib.reaches('a/x', 'a/sel')
  finally:
    gin.clear_config()


@gin.configurable('overridden_test_base')
class _Base:

  def __init__(self, size=1):
    self.size = size


@gin.configurable('overridden_test_sub')
class _Sub(_Base):

  def __init__(self, extra=0, **kwargs):
    self.extra = extra
    super().__init__(**kwargs)


def test_a_subclass_binding_over_its_bases_is_the_configs_own_layering_and_passes():
  # As KLPPO.n_eval_episodes over the PPO.n_eval_episodes of an included config.
  gin.clear_config()
  try:
    gin.parse_config(['overridden_test_base.size = 2', 'overridden_test_sub.size = 3'])
    assert config_lib.construct(_Sub).size == 3
    assert overridden.overridden_bindings() == []
  finally:
    gin.clear_config()
