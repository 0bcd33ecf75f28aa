"""Env steps per second of rl's JAX-native runs against a bare PPO floor, and of `--seeds` batches.

Three ratios, measured side by side in one run, the sides taking turns round
after round so that a drift in the machine's load weighs on all of them:

  jax_native/floor ratio: `python -m rl.run` of PPOJoint at PureJaxRL's CartPole
      settings (HPARAMS of benchmarks/ppo_floor.py), one seed, over the floor:
      PPO written out bare in the PureJaxRL style (benchmarks/ppo_floor.py),
      whole updates scanned in one jitted call.
  jax_native seeds/floor ratio: the same run with --seeds=0-7 over the floor
      under jax.vmap over 8 seeds (every seed's steps count).
  seeds/single throughput ratio: configs/ppo_minatar_breakout_jax.gin with
      --seeds=0-3 over the same config's single seed.

The rl side is the real command with its bookkeeping at the shipped configs'
cadence: metrics every epoch, evaluation every 10 epochs (10 greedy
episodes), a checkpoint every 50 and a core left to the runner
(`cpu_threads.host_cores = 1`) on CartPole, as ppo_cartpole.gin; the
Breakout config's own. Its rate is taken from two runs of the same command,
a short and a long one: (env steps of the longer - the shorter) / (wall
seconds of the longer - the shorter), so that start-up and compilation
cancel out. The floor is timed over as many updates in a row as those runs
differ by (1,000 for one seed, 250 for the vmapped seeds), once just before
and once just after each rl turn it is compared with, and each round's ratio
is rl's rate over the mean of those two; a ratio line gives the median of
the rounds' ratios. On a shared machine whose speed drifts by tens of percent
over minutes, a ratio of samples taken seconds apart cancels the drift that a
ratio of medians over the whole run would keep. rl's compiled epoch is also
timed alone, in this process (no evaluation, checkpoint or metrics written),
with XLA's CPU threads as the floor's (one per core). rl's two-network PPO
(each network its own optimizer, trained in turn) is run beside PPOJoint for
comparison. With --rejax_python (the python of a separate venv that has
rejax), rejax's PPO at its `breakout_1m` settings
(benchmarks/rejax_breakout.py) is timed against rl's PPO at the same
settings.

Usage: nice -n 10 python benchmarks/jax_native_throughput.py [--rounds 3]
           [--rejax_python /path/to/venv/bin/python] [--programs_only [--fast_compile]]
"""
import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time

# Run as a plain script from a checkout: the repo root is not on sys.path then.
REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO_ROOT)

import jax  # noqa: E402

from benchmarks.ppo_floor import ENV_ID  # noqa: E402
from benchmarks.ppo_floor import HPARAMS  # noqa: E402
from benchmarks.ppo_floor import ScanLoop  # noqa: E402
from benchmarks.ppo_floor import make_ppo  # noqa: E402
from benchmarks.ppo_floor import seconds  # noqa: E402

BREAKOUT = os.path.join(REPO_ROOT, 'configs', 'ppo_minatar_breakout_jax.gin')


def _parse_args():
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument('--rounds', type=int, default=3,
                      help='turns of every side; each side reports its median, each ratio the '
                      "median of the rounds' ratios")
  parser.add_argument('--updates', type=int, default=200,
                      help="the floor's PPO updates per timed call (each 512 env steps)")
  parser.add_argument('--seeds', type=int, default=8, help='seeds of the vmapped comparison')
  parser.add_argument('--breakout_seeds', type=int, default=4,
                      help='seeds of the Breakout --seeds run (0 skips it)')
  parser.add_argument('--programs_only', action='store_true',
                      help="time the floor and rl's epoch program only, not rl.run")
  parser.add_argument('--fast_compile', action='store_true',
                      help="compile rl's epoch program with XLA's elemental emitters "
                      '(compiler.fast_compile, as ppo_cartpole_jax.gin) instead of its fusion ones')
  parser.add_argument('--rejax_python', default=None,
                      help='python of a venv with rejax installed: also time rejax on Breakout')
  args = parser.parse_args()
  if min(args.rounds, args.updates, args.seeds) < 1 or args.breakout_seeds < 0:
    parser.error('--rounds, --updates and --seeds must be >= 1, --breakout_seeds >= 0')
  return args


# ---------------------------------------------------------------------------
# rl's side: gin configs of HPARAMS, run through `python -m rl.run`.
# ---------------------------------------------------------------------------

# What the runner's design keeps different from the floor: minibatches drawn
# at random rather than as a permutation of the update's steps, and GAE
# through added_policy_slice_length = 64 steps (the floor runs it over the
# whole 128-step rollout; (0.99 * 0.95)^64 = 2%).
_COMMON = """
RLTask.env = 'gymnax:{env}'
RLTask.n_envs = {n_envs}
RLTask.gamma = {gamma}
RLTask.seed = 0
train_rl.checkpoint_every = 50
compiler.fast_compile = False
cpu_threads.host_cores = 1
MLP.layer_widths = ({hidden}, {hidden})
MLP.activation_fn = 'tanh'
multifactor.factors = 'constant'
multifactor.constant = {lr}
Adam.weight_decay_rate = 0.0
Adam.eps = {adam_eps}
Adam.clip_grad_norm = {max_grad_norm}
{trainer}.n_interactions_per_epoch = {steps}
{trainer}.n_eval_episodes = 10
{trainer}.eval_every = 10
{trainer}.epsilon = {clip}
{trainer}.entropy_coeff = {ent_coef}
{trainer}.advantage_estimator = @gae
gae.lambda_ = {gae_lambda}
{trainer}.added_policy_slice_length = 64
{trainer}.max_slice_length = 1
train_rl.trainer_class = @{trainer}
"""

# rl's PPOJoint is the floor's algorithm: one network pair trained by one loss
# (clipped surrogate + value + entropy) with one optimizer, on advantages
# computed once per update from the network as the update starts. The
# floor's value term is vf_coef * 0.5 * squared error, hence a
# value_loss_coeff of vf_coef / 2 on rl's mean squared error.
JOINT = _COMMON + """PPOJoint.value_loss_coeff = {value_coeff}
PPOJoint.advantages_per_chunk = True
PPOJoint.batch_size = {batch}
PPOJoint.train_steps_per_epoch = {n_updates}
PPOJoint.joint_model = @PolicyAndValue
PolicyAndValue.joint = False
"""

# rl's PPO: separate policy and value networks with their own optimizers,
# trained in turn (twice the gradient steps and two advantage passes).
SEPARATE = _COMMON + """PPO.policy_batch_size = {batch}
PPO.policy_train_steps_per_epoch = {n_updates}
PPO.value_batch_size = {batch}
PPO.value_train_steps_per_epoch = {n_updates}
"""


def runner_config(template, trainer, hp=HPARAMS):
  """The gin text of `template` for the hyperparameters `hp`."""
  steps = hp['n_envs'] * hp['n_steps']
  return template.format(env=ENV_ID, trainer=trainer, steps=steps,
                         batch=steps // hp['minibatches'],
                         n_updates=hp['epochs'] * hp['minibatches'],
                         value_coeff=hp['vf_coef'] / 2, **hp)


class RlRun:
  """`python -m rl.run` of one config, timed as the difference of a short and a long run."""

  def __init__(self, workdir, name, config_file, steps_per_epoch, short, long, n_seeds=1,
               bindings=()):
    self.workdir, self.name, self.config_file = workdir, name, config_file
    self.steps = (long - short) * steps_per_epoch * n_seeds
    self.short, self.long, self.n_seeds, self.bindings = short, long, n_seeds, list(bindings)
    self.rates = []
    self._runs = 0

  def _seconds(self, n_epochs):
    self._runs += 1
    out = os.path.join(self.workdir, f'{self.name}_{self._runs}')
    command = [sys.executable, '-m', 'rl.run', f'--config_file={self.config_file}',
               f'--output_dir={out}', f'--config=train_rl.n_epochs = {n_epochs}']
    command += [f'--config={b}' for b in self.bindings]
    if self.n_seeds > 1:
      command.append(f'--seeds=0-{self.n_seeds - 1}')
    start = time.perf_counter()
    subprocess.run(command, cwd=REPO_ROOT, check=True, stdout=subprocess.DEVNULL)
    return time.perf_counter() - start

  def __call__(self):
    """One turn: the short run, then the long one; keeps the rate of their difference.

    The first turn starts with a run that fills the persistent compilation
    cache, so that both timed runs start alike.
    """
    if not self._runs:
      self._seconds(self.short)
    short = self._seconds(self.short)
    long = self._seconds(self.long)
    self.rates.append(self.steps / (long - short))

  @property
  def rate(self):
    return statistics.median(self.rates)


class EpochProgram:
  """rl's compiled epoch alone: `Learner.run_epoch` in a loop, no evaluation, no checkpoint,
  no metrics written."""

  def __init__(self, epochs=200, fast_compile=False):
    import gin  # pylint: disable=import-outside-toplevel
    from rl import compiler  # pylint: disable=import-outside-toplevel
    from rl import experiment  # pylint: disable=import-outside-toplevel,unused-import  (gin names)
    from rl.algorithms import PPOJoint  # pylint: disable=import-outside-toplevel
    from rl.envs.task import RLTask  # pylint: disable=import-outside-toplevel
    gin.clear_config()
    gin.parse_config(runner_config(JOINT, 'PPOJoint') + 'PPOJoint.n_eval_episodes = 0\n')
    compiler.configure(fast_compile=fast_compile)
    try:
      self._learner = PPOJoint(RLTask()).learner
    finally:
      gin.clear_config()
    # As the epoch loop sets it: each epoch dispatches the next before its
    # results are read back.
    self._learner.last_epoch = 10**9
    self._epochs = epochs
    self.steps = epochs * HPARAMS['n_envs'] * HPARAMS['n_steps']
    self.compile = seconds(self._run)
    self.rates = []

  def _run(self):
    for _ in range(self._epochs):
      self._learner.run_epoch()

  def __call__(self):
    self.rates.append(self.steps / seconds(self._run))

  @property
  def rate(self):
    return statistics.median(self.rates)


# ---------------------------------------------------------------------------
# The floor.
# ---------------------------------------------------------------------------

class Floor:
  """The floor's scan of --updates updates per call (under vmap over `seeds` seeds if > 1),
  timed over about `stretch` updates in a row a turn, as many as rl's runs differ by: on a
  shared machine a side timed in shorter samples, or by its best one, would be timed in the
  machine's quieter moments only."""

  def __init__(self, args, seeds=1, stretch=1000):
    init, update, self.steps_per_update = make_ppo(HPARAMS)
    if seeds == 1:
      state = jax.jit(init)(0)
    else:
      # Each seed initialised alone, then stacked (as rl.run --seeds does).
      one = jax.jit(init)
      state = jax.tree_util.tree_map(lambda *x: jax.numpy.stack(x),
                                     *[one(seed) for seed in range(seeds)])
      update = jax.vmap(update)
    self._loop = ScanLoop(update, state, args.updates)
    self.steps = seeds * args.updates * self.steps_per_update
    self.compile = seconds(self._loop)
    self._calls = 1
    self._per_turn = max(1, round(stretch / args.updates))
    self.rates = []

  def __call__(self):
    """One turn: the calls of one stretch, timed together."""
    start = time.perf_counter()
    for _ in range(self._per_turn):
      self._loop()
    self.rates.append(self._per_turn * self.steps / (time.perf_counter() - start))
    self._calls += self._per_turn

  def learning(self, env_steps):
    """Goes on training to at least `env_steps` steps (one seed): (steps, mean return of the
    episodes ended in the last call), to show that the floor is the real algorithm."""
    while True:
      return_sum, episodes = (float(jax.numpy.sum(x)) for x in self._loop())
      self._calls += 1
      if self._calls * self.steps >= env_steps:
        return self._calls * self.steps, return_sum / max(episodes, 1.0)

  @property
  def rate(self):
    return statistics.median(self.rates)


class Paired:
  """An rl turn between two turns of the floor: each round's ratio of rl's rate to the mean
  of the floor's just before and just after it."""

  def __init__(self, floor, run):
    self._floor, self._run = floor, run
    self.ratios = []

  def __call__(self):
    self._floor()
    self._run()
    self._floor()
    floor = statistics.mean(self._floor.rates[-2:])
    self.ratios.append(self._run.rates[-1] / floor)

  @property
  def ratio(self):
    return statistics.median(self.ratios)


def _print_program(floor, program, fast_compile):
  emitters = 'elemental' if fast_compile else 'fusion'
  print(f"rl's epoch program alone (PPOJoint, XLA's {emitters} emitters, no evaluation, "
        f'checkpoints or metrics written): {program.rate:,.0f} env steps/s '
        f'({program.rate / floor.rate:.2f} of the floor)')


def rejax_rate(python, rl_rate_fn):
  """(rejax's env steps/s, rl's at the same settings) on Breakout, taking turns."""
  script = os.path.join(REPO_ROOT, 'benchmarks', 'rejax_breakout.py')
  rejax = []
  for _ in range(2):
    out = subprocess.run([python, script], check=True, capture_output=True, text=True).stdout
    rejax.append(float(out.strip().splitlines()[-1].split()[-1]))
    rl_rate_fn()
  return statistics.median(rejax)


def main():
  args = _parse_args()
  print(f'PPO {HPARAMS} on gymnax {ENV_ID}; jax {jax.__version__} on '
        f'{jax.default_backend()}, {os.cpu_count()} cores; {args.rounds} rounds')
  # Each as long as the rl.run difference it is compared with (RlRun's long - short).
  floor, floor_seeds = Floor(args, stretch=1000), Floor(args, args.seeds, stretch=250)
  program = EpochProgram(fast_compile=args.fast_compile)
  if args.programs_only:
    for _ in range(args.rounds):
      floor()
      program()
    print(f'floor (PureJaxRL-style scan of updates): {floor.rate:,.0f} env steps/s')
    _print_program(floor, program, args.fast_compile)
    return
  per_epoch = HPARAMS['n_envs'] * HPARAMS['n_steps']
  with tempfile.TemporaryDirectory() as workdir:
    configs = {}
    for name, template, trainer in (('joint', JOINT, 'PPOJoint'), ('separate', SEPARATE, 'PPO')):
      configs[name] = os.path.join(workdir, f'{name}.gin')
      with open(configs[name], 'w', encoding='utf-8') as f:
        f.write(runner_config(template, trainer))
    runs = {
        'joint': RlRun(workdir, 'joint', configs['joint'], per_epoch, 100, 1100),
        'separate': RlRun(workdir, 'separate', configs['separate'], per_epoch, 100, 1100),
        'joint_seeds': RlRun(workdir, 'joint_seeds', configs['joint'], per_epoch, 50, 300,
                             n_seeds=args.seeds),
    }
    if args.breakout_seeds:
      runs['breakout'] = RlRun(workdir, 'breakout', BREAKOUT, 1024, 50, 200)
      runs['breakout_seeds'] = RlRun(workdir, 'breakout_seeds', BREAKOUT, 1024, 50, 200,
                                     n_seeds=args.breakout_seeds)
    paired = {'joint': Paired(floor, runs['joint']),
              'joint_seeds': Paired(floor_seeds, runs['joint_seeds'])}
    breakout_ratios = []
    for _ in range(args.rounds):
      program()
      for name, run in runs.items():
        (paired[name] if name in paired else run)()
      if args.breakout_seeds:
        breakout_ratios.append(runs['breakout_seeds'].rates[-1] / runs['breakout'].rates[-1])
    print(f'floor (PureJaxRL-style scan of {args.updates} updates per call): '
          f'{floor.rate:,.0f} env steps/s, compile {floor.compile:.1f} s')
    print(f'floor vmapped over {args.seeds} seeds: {floor_seeds.rate:,.0f} env steps/s all seeds')
    _print_program(floor, program, args.fast_compile)
    print(f"rl.run PPOJoint, one seed: {runs['joint'].rate:,.0f} env steps/s")
    print(f"rl.run PPO (separate networks), one seed: {runs['separate'].rate:,.0f} env steps/s "
          f"({runs['separate'].rate / floor.rate:.2f} of the floor)")
    print(f"rl.run PPOJoint --seeds=0-{args.seeds - 1}: {runs['joint_seeds'].rate:,.0f} env "
          'steps/s all seeds')
    if args.breakout_seeds:
      print(f"rl.run ppo_minatar_breakout_jax: one seed {runs['breakout'].rate:,.0f}, "
            f"--seeds=0-{args.breakout_seeds - 1} {runs['breakout_seeds'].rate:,.0f} env steps/s")
    if args.rejax_python:
      at_rejax = RlRun(workdir, 'rejax_settings', BREAKOUT, 1024, 50, 250,
                       bindings=REJAX_SETTINGS)
      # The config gives XLA every core, for --seeds batches; one seed runs
      # faster with a core left to the runner.
      at_rejax_one = RlRun(workdir, 'rejax_settings_one', BREAKOUT, 1024, 50, 250,
                           bindings=REJAX_SETTINGS + ('cpu_threads.host_cores = 1',))
      rejax = rejax_rate(args.rejax_python, lambda: (at_rejax(), at_rejax_one()))
      print(f'rejax PPO breakout_1m: {rejax:,.0f} env steps/s; rl PPO at its settings: '
            f'{at_rejax.rate:,.0f}, with cpu_threads.host_cores = 1 {at_rejax_one.rate:,.0f}; '
            f'rl/rejax ratio: {at_rejax.rate / rejax:.2f} '
            f'({at_rejax_one.rate / rejax:.2f} with a core left to the runner)')
  steps, mean_return = floor.learning(200_000)
  print(f'learning (the floor, seed 0): mean return {mean_return:.1f} of the episodes that '
        f'ended in its last {args.updates} updates, at {steps:,} env steps')
  for name, line in (('joint', 'jax_native/floor'), ('joint_seeds', 'jax_native seeds/floor')):
    print(f"{line}, each round: {', '.join(f'{r:.2f}' for r in paired[name].ratios)}")
  print(f"jax_native/floor ratio: {paired['joint'].ratio:.2f}")
  print(f"jax_native seeds/floor ratio: {paired['joint_seeds'].ratio:.2f}")
  if args.breakout_seeds:
    print(f"seeds/single throughput ratio: {statistics.median(breakout_ratios):.2f} (each round: "
          f"{', '.join(f'{r:.2f}' for r in breakout_ratios)})")


# rejax's `breakout_1m` PPO settings on rl's PPO (configs/ppo_minatar_breakout_jax.gin):
# 32 envs x 32 steps, 4 passes of 4 minibatches for each network, a constant
# learning rate, evaluation every 50k env steps.
REJAX_SETTINGS = (
    'PPO.policy_train_steps_per_epoch = 16', 'PPO.value_train_steps_per_epoch = 16',
    "policy/multifactor.factors = 'constant'", "value/multifactor.factors = 'constant'",
    'policy/multifactor.constant = 2.5674e-4', 'value/multifactor.constant = 2.5674e-4',
)


if __name__ == '__main__':
  main()
