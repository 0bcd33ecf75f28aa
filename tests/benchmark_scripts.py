"""Loads a script of benchmarks/ (a folder of scripts, not a package) as a module for its tests."""
import importlib.util
import os
import sys

_FOLDER = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), 'benchmarks')


def load(name, module_name=None):
  """benchmarks/<name>.py, executed once per process and registered as `module_name`."""
  module_name = module_name or name
  if module_name not in sys.modules:
    spec = importlib.util.spec_from_file_location(module_name, os.path.join(_FOLDER, f'{name}.py'))
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    spec.loader.exec_module(module)
  return sys.modules[module_name]
