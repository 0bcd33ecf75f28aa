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
(benchmarks/rejax_breakout.py) is timed against rl at the same settings,
PPOJoint (the like-for-like: rejax updates actor and critic on each minibatch
together) with PPO beside it, a turn of rl's between two of rejax's in each
round, as with the floor (the sides and their pairing:
benchmarks/throughput_turns.py).

Usage: nice -n 10 python benchmarks/jax_native_throughput.py [--rounds 3]
           [--rejax_python /path/to/venv/bin/python] [--programs_only [--fast_compile]]
"""
import argparse
import os
import statistics
import sys
import tempfile

# Run as a plain script from a checkout: the repo root is not on sys.path then.
REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO_ROOT)

import jax  # noqa: E402

from benchmarks.ppo_floor import ENV_ID  # noqa: E402
from benchmarks.ppo_floor import HPARAMS  # noqa: E402
from benchmarks.ppo_floor import seconds  # noqa: E402
from benchmarks.throughput_turns import Floor  # noqa: E402
from benchmarks.throughput_turns import Paired  # noqa: E402
from benchmarks.throughput_turns import RejaxRun  # noqa: E402
from benchmarks.throughput_turns import RlRun  # noqa: E402
from benchmarks.throughput_turns import rejax_ratios  # noqa: E402

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


def _print_program(floor, program, fast_compile):
  emitters = 'elemental' if fast_compile else 'fusion'
  print(f"rl's epoch program alone (PPOJoint, XLA's {emitters} emitters, no evaluation, "
        f'checkpoints or metrics written): {program.rate:,.0f} env steps/s '
        f'({program.rate / floor.rate:.2f} of the floor)')


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
    rejax_line = None
    if args.rejax_python:
      joint_config = os.path.join(workdir, 'rejax_joint.gin')
      with open(joint_config, 'w', encoding='utf-8') as f:
        f.write(REJAX_JOINT)
      at_rejax = {
          'joint': RlRun(workdir, 'rejax_joint', joint_config, 1024, 50, 250),
          'separate': RlRun(workdir, 'rejax_separate', BREAKOUT, 1024, 50, 250,
                            bindings=REJAX_SETTINGS)}
      rejax = RejaxRun(args.rejax_python)
      ratios = rejax_ratios(rejax, at_rejax, args.rounds)
      print(f'rejax PPO breakout_1m: {rejax.rate:,.0f} env steps/s; rl at '
            f"its settings: PPOJoint {at_rejax['joint'].rate:,.0f}, PPO (separate networks) "
            f"{at_rejax['separate'].rate:,.0f}")
      rejax_line = (f"rl/rejax ratio: {statistics.median(ratios['joint']):.2f} (PPOJoint; each "
                    f"round: {', '.join(f'{r:.2f}' for r in ratios['joint'])}; rl's PPO "
                    f"{statistics.median(ratios['separate']):.2f}, each round: "
                    f"{', '.join(f'{r:.2f}' for r in ratios['separate'])})")
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
  if rejax_line:
    print(rejax_line)


# rejax's `breakout_1m` PPO settings on rl's PPO (configs/ppo_minatar_breakout_jax.gin):
# 32 envs x 32 steps, 4 passes of 4 minibatches for each network, a constant
# learning rate, evaluation every 50k env steps.
REJAX_SETTINGS = (
    'PPO.policy_train_steps_per_epoch = 16', 'PPO.value_train_steps_per_epoch = 16',
    "policy/multifactor.factors = 'constant'", "value/multifactor.factors = 'constant'",
    'policy/multifactor.constant = 2.5674e-4', 'value/multifactor.constant = 2.5674e-4',
)


# rl's PPOJoint at the same settings, the like-for-like of rejax's PPO: rejax
# updates its actor and critic (separate networks, as PolicyAndValue.joint =
# False) on each minibatch together, as PPOJoint's one loss over both does.
# One Adam over both networks is Adam on each, but for the gradient-norm clip
# taken over both. The Breakout config's cadence: an evaluation every 49
# epochs, a checkpoint every 100, XLA on every core.
REJAX_JOINT = """
RLTask.env = 'gymnax:Breakout-MinAtar'
RLTask.n_envs = 32
RLTask.gamma = 0.995
RLTask.seed = 0
train_rl.trainer_class = @PPOJoint
train_rl.checkpoint_every = 100
compiler.fast_compile = False
cpu_threads.host_cores = 0
PPOJoint.n_interactions_per_epoch = 1024
PPOJoint.n_eval_episodes = 10
PPOJoint.eval_every = 49
PPOJoint.joint_model = @PolicyAndValue
PolicyAndValue.joint = False
PPOJoint.optimizer = @Adam
PPOJoint.lr_schedule = @multifactor
PPOJoint.batch_size = 256
PPOJoint.train_steps_per_epoch = 16
PPOJoint.max_slice_length = 1
PPOJoint.advantages_per_chunk = True
PPOJoint.advantage_estimator = @gae
gae.lambda_ = 0.95
PPOJoint.added_policy_slice_length = 32
PPOJoint.epsilon = 0.2
PPOJoint.value_loss_coeff = 0.25
PPOJoint.entropy_coeff = 0.01
MLP.layer_widths = (64, 64)
MLP.activation_fn = 'tanh'
Adam.weight_decay_rate = 0.0
Adam.clip_grad_norm = 1.0
multifactor.factors = 'constant'
multifactor.constant = 2.5674e-4
"""


if __name__ == '__main__':
  main()
