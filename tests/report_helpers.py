"""Hand-made run folders for rl.report's tests: config.gin and metrics.jsonl written directly."""
import json
import os

from rl import report_figure


def record(epoch, env_steps, eval_return, seconds=(1.0, 2.0, 1.0)):
  """An epoch's record; its train_return is its eval_return halved (None with it)."""
  collect, train, evaluate = seconds
  return {'epoch': epoch, 'env_steps': env_steps, 'eval_return': eval_return,
          'train_return': None if eval_return is None else eval_return / 2,
          'time_collect': collect, 'time_train': train, 'time_eval': evaluate}


# The first epoch's seconds: mostly jit compilation, so far more than the others'.
COMPILE_SECONDS = (15.0, 4.0, 1.0)


def write_run(folder, config, records):
  os.makedirs(folder)
  with open(os.path.join(folder, 'config.gin'), 'w') as f:
    f.write(config)
  with open(os.path.join(folder, 'metrics.jsonl'), 'w') as f:
    f.writelines(json.dumps(r) + '\n' for r in records)


def make_run(folder, seed, learning_rate, evals, n_epochs=None, stop_at_return=None,
              env='CartPole-v1'):
  """A run folder: config.gin and metrics.jsonl with evals at 100, 200, ... env steps.

  The run asked for `n_epochs` (default: as many as `evals`, so it finished).
  """
  config = ('# Parameters for Adam:\n'
            f'Adam.learning_rate = {learning_rate}\n'
            f"RLTask.env = '{env}'\n"
            f'RLTask.seed = {seed}\n'
            f'train_rl.n_epochs = {len(evals) if n_epochs is None else n_epochs}\n'
            f'train_rl.stop_at_return = {stop_at_return}\n')
  write_run(folder, config,
             [record(i + 1, 100 * (i + 1), value, COMPILE_SECONDS if i == 0 else (1.0, 2.0, 1.0))
              for i, value in enumerate(evals)])


def captured_panels(monkeypatch):
  """The panels make_report hands the figure, and its keyword arguments, once it has run."""
  calls = []
  monkeypatch.setattr(report_figure, 'plot',
                      lambda panels, path, **kwargs: calls.append((panels, kwargs)))
  return calls


def make_runs(tmp_path):
  """Two groups (learning rates): three seeds, and two seeds four levels down."""
  make_run(str(tmp_path / 'fast' / 'seed_0'), 0, 0.1, [10.0, 500.0, 480.0])
  make_run(str(tmp_path / 'fast' / 'seed_1'), 1, 0.1, [20.0, 100.0, 490.0])
  make_run(str(tmp_path / 'fast' / 'seed_2'), 2, 0.1, [30.0, 200.0, 300.0])
  make_run(str(tmp_path / 'slow' / 'sweep' / 'lr' / 'seed_0'), 0, 0.01, [5.0, 6.0, 7.0])
  # A null eval (no episode ended) is skipped, not taken as the final value.
  make_run(str(tmp_path / 'slow' / 'sweep' / 'lr' / 'seed_1'), 1, 0.01, [1.0, 3.0, None])
  return str(tmp_path)
