"""Your own gymnasium env: the 'module:EnvId' form and a gin `import`, trained and resumed."""
import os
import subprocess
import sys
import textwrap

import pytest

from run_helpers import REINFORCE
from run_helpers import ROOT
from run_helpers import TINY
from run_helpers import assert_one_line_error
from run_helpers import cli

# A module registering a tiny env: reward 1 for the action matching the sign of
# the observation, 10 steps an episode.
ENV_MODULE = textwrap.dedent('''
    import gymnasium as gym
    import numpy as np


    class Sign(gym.Env):
      observation_space = gym.spaces.Box(-1.0, 1.0, (2,), np.float32)
      action_space = gym.spaces.Discrete(2)

      def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        return self._observe(), {}

      def _observe(self):
        self._obs = self.np_random.uniform(-1, 1, 2).astype(np.float32)
        return self._obs

      def step(self, action):
        reward = float(int(action) == int(self._obs[0] > 0))
        return self._observe(), reward, False, False, {}


    gym.register(id='Sign-v0', entry_point=__name__ + ':Sign', max_episode_steps=10)
    ''')


def _cli(tmp_path, *args):
  """rl.run with the env module's folder on PYTHONPATH, run from another folder."""
  env = dict(os.environ)
  env['PYTHONPATH'] = os.pathsep.join([str(tmp_path / 'envs'), ROOT, env.get('PYTHONPATH', '')])
  return subprocess.run([sys.executable, '-m', 'rl.run', *args], cwd=tmp_path, env=env,
                        capture_output=True, text=True, timeout=240)


@pytest.fixture
def env_module(tmp_path):
  (tmp_path / 'envs').mkdir()
  (tmp_path / 'envs' / 'my_sign_env.py').write_text(ENV_MODULE)
  return tmp_path


def _bindings(n_epochs):
  return [f'--config={b}' for b in TINY + [f'train_rl.n_epochs = {n_epochs}']]


# One epoch, then a resume to a second: the tests read whether the env is found
# and the folder resumes, not what it learns.
FIRST, RESUMED = 1, 2


def test_module_colon_env_id_trains_and_resumes_from_its_folder(env_module):
  out = env_module / 'run'
  first = _cli(env_module, f'--config_file={REINFORCE}', *_bindings(FIRST),
               "--config=RLTask.env = 'my_sign_env:Sign-v0'", f'--output_dir={out}')
  assert first.returncode == 0, first.stderr
  assert "RLTask.env = 'my_sign_env:Sign-v0'" in (out / 'config.gin').read_text()
  # The saved config imports the module again: the folder alone resumes.
  resumed = _cli(env_module, f'--output_dir={out}', f'--config=train_rl.n_epochs = {RESUMED}')
  assert resumed.returncode == 0, resumed.stderr
  assert f'Resuming {out} from epoch {FIRST}/' in resumed.stdout
  assert (out / 'metrics.jsonl').read_text().count('\n') == RESUMED


def test_a_gin_import_registers_the_env_and_the_folder_resumes(env_module):
  config = env_module / 'sign.gin'
  config.write_text(f"import my_sign_env\ninclude '{REINFORCE}'\nRLTask.env = 'Sign-v0'\n")
  out = env_module / 'run'
  first = _cli(env_module, f'--config_file={config}', *_bindings(FIRST), f'--output_dir={out}')
  assert first.returncode == 0, first.stderr
  assert (out / 'config.gin').read_text().startswith('import my_sign_env\n')
  resumed = _cli(env_module, f'--output_dir={out}', f'--config=train_rl.n_epochs = {RESUMED}')
  assert resumed.returncode == 0, resumed.stderr
  assert f'Resuming {out} from epoch {FIRST}/' in resumed.stdout


def test_a_module_that_is_not_there_is_one_line(tmp_path):
  # In this process: the module is found on no path, whichever process looks.
  out = tmp_path / 'run'
  missing = cli(f'--config_file={REINFORCE}', *_bindings(FIRST),
                "--config=RLTask.env = 'not_my_module:Sign-v0'", f'--output_dir={out}')
  assert_one_line_error(missing, "'not_my_module'", 'PYTHONPATH')
  assert missing.returncode == 2 and not out.exists()
  # The gymnax: prefix is no module: it still names gymnax's envs.
  jax = cli(f'--config_file={REINFORCE}', *_bindings(FIRST),
            "--config=RLTask.env = 'gymnax:NoSuchEnv-v1'", f'--output_dir={out}')
  assert_one_line_error(jax, 'gymnax')
  assert 'PYTHONPATH' not in jax.stderr
  assert not out.exists()
