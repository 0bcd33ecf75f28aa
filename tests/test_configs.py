"""Every shipped gin file parses against the package's configurables, and every config the
learning benchmark knows has its file (the learning itself is benchmarks/learning.py's job)."""
import glob
import os

import gin
import pytest

import benchmark_scripts
from rl import config
from rl import experiment  # noqa: F401  (registers every configurable the configs name)
from run_helpers import ROOT

CONFIGS = sorted(glob.glob(os.path.join(ROOT, 'configs', '*.gin')))


def test_the_shipped_configs_are_found():
  assert len(CONFIGS) >= 20


@pytest.mark.parametrize('path', CONFIGS, ids=[os.path.basename(p) for p in CONFIGS])
def test_each_shipped_config_parses_and_names_a_trainer(path):
  gin.clear_config()
  config.parse_config([path], [])  # as rl.run reads it: an unknown configurable raises here
  trainer = gin.query_parameter('train_rl.trainer_class')
  assert trainer.selector  # a reference such as @PPO
  gin.clear_config()


def test_every_learning_benchmark_config_has_its_file():
  module = benchmark_scripts.load('learning', 'learning_benchmark')
  names = {os.path.basename(p)[:-len('.gin')] for p in CONFIGS}
  assert set(module.REGISTRY) <= names
