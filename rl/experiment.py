"""One training run: from its config to a trained, checkpointed run folder.

`execute` parses the config (rl.config), builds the task and the trainer,
checks that the folder can take the run (rl.run_folder), resumes from the
folder's last checkpoint if there is one, and trains to `train_rl.n_epochs`.
Everything that can be wrong with the input is found before the first write
to the folder. `execute_seeds` does the same for several seeds of one config
and the cells of a grid (rl.members). Ctrl-C and a non-finite loss end a run with one line that says
where it stopped and what a rerun does; so does a write that fails (a full
disk), which leaves the last good checkpoint for the rerun.

Start-up: nothing here compiles or touches a device at import time, and what a
run needs only later (orbax at the first checkpoint, tensorboardX at the first
epoch's end) is imported then, so a run reaches its first epoch soon after
jax, flax and optax are imported (benchmarks/startup.py measures it).
"""
import contextlib
import os
import time

import gin

from rl import compiler
from rl import config
from rl import console
from rl import errors
from rl import overridden
from rl import registrations  # pylint: disable=unused-import  (every configurable)
from rl import run_folder
from rl import run_settings
from rl.configurables import configurable
from rl.data.checkpoints import Checkpointer
from rl.envs.task import RLTask
from rl.errors import ConfigError
from rl.errors import Interrupted
from rl.errors import NonFiniteLossError
from rl.errors import OutputDirError
from rl.errors import WriteFailed
from rl.learner import loop as loop_lib
from rl.learner import time_left
from rl.metrics import MetricsWriter
from rl.metrics import format_return

# Bindings that may change between a run and its resume.
RESUMABLE_BINDINGS = ('train_rl.n_epochs', 'train_rl.stop_at_return', 'console.verbose',
                      'console.every_seconds', 'console.progress_seconds')
# When set, a run appends '<event> <time.time()>' lines to this file as it
# reaches 'main' (imports done, flags parsed), 'first_epoch_start' (the first
# epoch this process runs begins) and 'first_epoch_end' (its record and
# console line are written). benchmarks/startup.py reads them.
TIMING_ENV_VAR = 'RL_TIMING_FILE'


@configurable(denylist=['task', 'output_dir'])
def train_rl(output_dir=None, trainer_class=gin.REQUIRED, n_epochs=100,
             checkpoint_every=10, stop_at_return=None, task=None):
  """Builds the trainer and runs it to `n_epochs` total epochs, resuming if it can.

  Args:
    output_dir: the run folder (from the runner; not bindable in gin).
    trainer_class: the trainer, e.g. @PolicyGradientTrainer.
    n_epochs: total epochs of the run; raise it to extend a finished run. 0 sets up
      the folder (config.gin) and trains nothing.
    checkpoint_every: checkpoint every this many epochs (and after the last).
    stop_at_return: stop early once the greedy eval return reaches this
      (None: run all n_epochs). Benchmarks use it to stop at their target.
    task: the RLTask (from the runner).
  """
  return _Run(output_dir, trainer_class, n_epochs, checkpoint_every, stop_at_return, task)


class _Run:
  """The parts of one run, built (and validated) before anything is written."""

  def __init__(self, output_dir, trainer_class, n_epochs, checkpoint_every, stop_at_return,
               task):
    self.output_dir = output_dir
    self.stop_at_return = stop_at_return
    self.n_epochs = int(n_epochs)
    self.checkpoint_every = int(checkpoint_every)
    if self.n_epochs < 0 or self.checkpoint_every < 1:
      raise ConfigError('train_rl.n_epochs must be >= 0 and train_rl.checkpoint_every >= 1.')
    if not isinstance(trainer_class, type):
      raise ConfigError('train_rl.trainer_class must be a trainer class, e.g. '
                        'train_rl.trainer_class = @PolicyGradientTrainer.')
    self.trainer = config.construct(trainer_class, task=task, output_dir=output_dir)
    self.trainer.build()


class PreparedRun:
  """One run folder, built, locked and restored, ready to train (see `prepared_run`)."""

  def __init__(self, run, output_dir, checkpointer, full_config, log, writer):
    self.run = run
    self.trainer = run.trainer
    self.learner = run.trainer.learner
    self.output_dir = output_dir
    self.checkpointer = checkpointer
    self.full_config = full_config
    self.log = log
    self.writer = writer
    self._first_line = True
    self.console = None  # rl.console.console_settings(), from prepared_run
    # The job's (--seeds): (plain, evaluating) epochs of the runs after this
    # one, and the console throttle all its runs share (None: the run's own).
    self.later = (0, 0)
    self.throttle = None
    self.complete_at_start = False  # nothing to train: its opening line says so

  def save(self):
    arrays, meta = self.learner.state_dict()
    meta['config'] = self.full_config
    meta['fast_compile'] = compiler.fast_compile()  # a resume compiles as the run started
    self.checkpointer.save(self.learner.epoch, arrays, meta)

  def log_epoch(self, line, quiet=False, progress=False):
    """An epoch's line (or, `progress`, a line about the epoch in progress) to log.txt,
    and to the console unless `quiet`."""
    self.log.info(line, extra={run_folder.QUIET: quiet})
    if self._first_line and not progress:
      self._first_line = False
      mark_time('first_epoch_end')

  def epoch_loop(self):
    """The learner's EpochLoop with this run's checkpoints, metrics and console."""
    from rl.learner.loop import EpochLoop  # pylint: disable=import-outside-toplevel
    return EpochLoop(self.learner, self.run.n_epochs, self.save, self.run.checkpoint_every,
                     self.writer, self.log_epoch, self.run.stop_at_return, self.console,
                     self.later, throttle=self.throttle)

  def epochs_left(self):
    """(plain, evaluating) epochs this run has left to train."""
    options = self.learner.options
    return time_left.epochs_left(self.learner.epoch, self.run.n_epochs, options.eval_every,
                                 options.n_eval_episodes)

  def interrupted(self):
    """The Interrupted error of a Ctrl-C now: where the run stopped, how to resume."""
    return Interrupted(run_folder.interrupted_message(self.output_dir, *self.stopped_at()))

  def stopped_at(self):
    """(epoch in progress, n_epochs, epoch of the last checkpoint or None), for a Ctrl-C now."""
    self.checkpointer.settle()  # a checkpoint still being written counts once written
    # The epoch in progress is the one after the last logged (at most the last).
    epoch = min(len(self.learner.history) + 1, self.run.n_epochs)
    return epoch, self.run.n_epochs, run_folder.last_checkpoint(self.checkpointer)

  def non_finite(self, e):
    """`e` (a NonFiniteLossError) with what this run's checkpoints and config allow."""
    return NonFiniteLossError(e.metric, e.value, e.step, what_now=after_non_finite(
        run_folder.last_checkpoint(self.checkpointer), gin.operative_config_str()))

  def write_failed(self, e):
    """`e` (a WriteFailed) with what this run's checkpoints allow a rerun to do."""
    return WriteFailed(e.what, e.reason, what_now=run_folder.after_write_failure(
        run_folder.last_checkpoint(self.checkpointer)))

  def log_done(self, next_steps=True):
    """The run's closing lines: what it reached, and (next_steps) what to do with it."""
    learner = self.learner
    if not self.complete_at_start:  # else its opening line said it is complete
      last = learner.history[-1] if learner.history else {}
      self.log.info('Training is done: %s, %s, eval return %s. Outputs in %s.',
                    console.plural(learner.epoch, 'epoch'),
                    console.plural(learner.task.n_interactions, 'env step'),
                    format_return(last.get('eval_return')), self.output_dir)
    if next_steps and self.run.n_epochs:
      self.log.info(console.next_steps(self.output_dir))


def restore(run, output_dir, checkpoint, full_config, allow_config_change, from_saved_config):
  """Brings a fresh run to the state of the folder's newest `checkpoint` (None: to its start).

  A resume must keep the config the run started with (RESUMABLE_BINDINGS
  aside, or with allow_config_change) and may only extend its epochs.
  """
  learner = run.trainer.learner
  if checkpoint is None:
    learner.collect_initial()
    return
  _, arrays, meta = checkpoint
  # Bindings the run never reads (never called, or overridden) have no effect either way.
  configs = (meta.get('config', ''), full_config)
  unused = config.unused_keys(*configs) | overridden.overridden_keys(*configs)
  diffs = config.config_difference(meta.get('config', ''), full_config,
                                   new_is_operative=from_saved_config,
                                   ignored=set(RESUMABLE_BINDINGS) | unused)
  if diffs and not allow_config_change:
    raise OutputDirError(
        f"output folder '{output_dir}' holds a run with a different config ("
        + '; '.join(diffs) + '); use another --output_dir, or '
        '--allow_config_change to resume it anyway.')
  if meta['epoch'] > run.n_epochs:
    raise ConfigError(
        f"train_rl.n_epochs ({run.n_epochs}) is lower than the {meta['epoch']} epochs "
        f"already finished in '{output_dir}'; raise n_epochs or use another --output_dir.")
  # The programs built so far made the initial state, which the checkpoint replaces.
  run_settings.keep_started_kernels(meta)
  try:
    learner.load_state_dict(arrays, meta)
  except (ValueError, KeyError, TypeError) as e:
    raise ConfigError(
        f"the checkpoint in '{output_dir}' does not fit the configured model or "
        f'optimizer ({config.first_sentence(str(e))[:200]}); a changed binding altered their '
        'shapes. Use another --output_dir.') from None


@contextlib.contextmanager
def prepared_run(config_files, bindings, output_dir=None, seed=None, allow_config_change=False,
                 log_prefix='', check=None):
  """Parses the config, builds and resumes one run; yields its PreparedRun.

  Without `config_files`, the run in `output_dir` resumes from its saved
  config. Everything that can be wrong is checked before the folder is
  written to; the folder stays locked until the context exits, which closes
  the run's writer, checkpointer and envs. log_prefix: put before every
  console line (several runs in one process). check: called with the learner and
  the bindings the run does not use before the folder is written (a job's own checks,
  rl.members).
  """
  from_saved_config = not config_files
  if from_saved_config:
    config_files = [run_folder.saved_config(output_dir)]
  run_settings.configure(config_files, bindings, seed)
  if output_dir is None:
    output_dir = run_folder.default_output_dir(config_files)
  run_folder.check_output_dir(output_dir)
  full_config = gin.config_str()

  task = config.construct(RLTask)
  run = config.construct(train_rl, output_dir=output_dir, task=task)
  learner = run.trainer.learner
  console_settings = config.construct(console.console_settings)
  unused = config.unused_bindings()  # once every configurable of the run is called
  overridden.check_run()
  if check is not None:
    check(learner, unused)

  os.makedirs(output_dir, exist_ok=True)
  with run_folder.folder_lock(output_dir):
    checkpointer = Checkpointer(os.path.join(output_dir, run_folder.CHECKPOINT_DIR),
                                background=True)
    checkpoint = checkpointer.restore_latest()
    restore(run, output_dir, checkpoint, full_config, allow_config_change, from_saved_config)
    log = run_folder.setup_logging(output_dir, log_prefix)
    # A warning, not a refusal: a shared include or a sweep's grid binds
    # parameters of configurables that only some of its runs use.
    if unused:
      log.warning('Warning: %s', config.unused_bindings_warning(unused))
      if len(unused) > config.MAX_NAMED_UNUSED:
        log.info('Bindings not used by this run: %s.', ', '.join(unused),
                 extra={run_folder.QUIET: True})
    run_folder.save_config(output_dir, config.config_to_save(unused))
    writer = MetricsWriter(output_dir, learner.history)
    try:
      prepared = PreparedRun(run, output_dir, checkpointer, full_config, log, writer)
      prepared.console = console_settings
      prepared.complete_at_start = prepared.epoch_loop().done
      log.info(console.run_line(config.configured_env(), type(run.trainer).__name__,
                                learner.epoch, run.n_epochs, prepared.complete_at_start,
                                output_dir))
      if checkpoint is not None and learner.task.resume_warning:
        log.warning('Warning: %s', learner.task.resume_warning)
      yield prepared
    except BaseException:
      # The error under way is the one to report, not a close's failing on the same full disk.
      with contextlib.suppress(WriteFailed):
        writer.close()
      raise
    else:
      writer.close()
    finally:
      checkpointer.close()
      learner.close()


def execute(config_files, bindings, output_dir=None, seed=None, allow_config_change=False):
  """Parses the config, builds, resumes and runs. Returns the finished trainer.

  Without `config_files`, the run in `output_dir` resumes from its saved config.
  """
  with prepared_run(config_files, bindings, output_dir, seed, allow_config_change) as prepared:
    train(prepared)
  prepared.log_done()
  return prepared.trainer


def train(prepared):
  """Runs a PreparedRun's epochs, turning Ctrl-C and NaN stops into their one-line errors."""
  with errors.one_line_errors(lambda: prepared, prepared.interrupted):
    if prepared.learner.epoch < prepared.run.n_epochs:
      mark_time('first_epoch_start')
    loop_lib.run(prepared.epoch_loop())
    prepared.checkpointer.wait()  # the last checkpoint is on disk before the run says done


def execute_seeds(config_files, bindings, output_dir, seeds, allow_config_change=False,
                  grid=None):
  """Runs `seeds` of one config, each in its own folder <output_dir>/seed_<n>, and with
  `grid` ({binding: [values]}) every cell of it times every seed, in
  <output_dir>/<cell>/seed_<n> (rl.members). Returns the trainers.
  """
  from rl import members  # pylint: disable=import-outside-toplevel
  return members.execute(config_files, bindings, output_dir, seeds, allow_config_change, grid)


def mark_time(event):
  """Appends '<event> <wall seconds>' to $RL_TIMING_FILE, if set (for benchmarks/startup.py)."""
  path = os.environ.get(TIMING_ENV_VAR)
  if path:
    with open(path, 'a') as f:
      f.write(f'{event} {time.time():.6f}\n')


def after_non_finite(checkpoint_epoch, operative_config):
  """What a NaN stop leaves and what to change, true to the run's checkpoints and clipping.

  A changed learning rate is a changed config, which a resume refuses
  without --allow_config_change; the clipping advice names an optimizer that
  is used without clipping, or says that every one clips already.
  """
  clipping = {k: v for k, v in config.config_bindings(operative_config).items()
              if k.endswith('.clip_grad_norm')}
  unclipped = [k for k, v in clipping.items() if v == 'None']
  if unclipped or not clipping:
    fix = ('lower the learning rate or enable gradient clipping (e.g. '
           f"{unclipped[0] if unclipped else 'Adam.clip_grad_norm'} = 0.5)")
  else:
    settings = ', '.join(f'{k} = {v}' for k, v in clipping.items())
    fix = f'gradient clipping is already on ({settings}), so lower the learning rate'
  if checkpoint_epoch is None:
    return f'no checkpoint was written yet. To retry, {fix} and rerun.'
  return (f'the last good checkpoint (epoch {checkpoint_epoch}) is kept. To go on, {fix} and '
          'rerun with --allow_config_change (or start over in another --output_dir).')
