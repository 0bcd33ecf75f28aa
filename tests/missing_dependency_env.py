"""A registered env whose optional package is missing, as LunarLander-v3 is without box2d.

A gin config with the line `import tests.missing_dependency_env` registers
'rl_test/NeedsMissingPackage-v0': building it raises gymnasium's
DependencyNotInstalled with a message shaped like gymnasium's own (what is
missing, then the install command). The real envs raise it only where their
package is absent, so a test on them alone would stop testing anything on a
machine that has box2d or mujoco; this one fails the same way everywhere.

Imported as `tests.missing_dependency_env`: `python -m rl.run` runs in the
repository root, where `tests` is a namespace package.
"""
import gymnasium as gym

ENV_ID = 'rl_test/NeedsMissingPackage-v0'
INSTALL_HINT = 'pip install "gymnasium[rl-test-missing]"'


def make(**kwargs):
  del kwargs
  raise gym.error.DependencyNotInstalled(
      f'rl_test_missing is not installed, you can install it by run `{INSTALL_HINT}`')


if ENV_ID not in gym.registry:
  gym.register(ENV_ID, entry_point=make)
