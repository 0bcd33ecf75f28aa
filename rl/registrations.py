"""Imports every module that registers gin configurables, for their registrations.

Once this module is imported, a config can name every configurable of the package.
"""
# pylint: disable=unused-import
from rl import algorithms
from rl.nets import cnn
from rl.nets import heads
from rl.nets import mlp
from rl.nets import normalizer
from rl.nets import transformer
from rl.ops import advantages
from rl.ops import distributions
from rl.optim import lr_schedules
from rl.optim import optimizers
