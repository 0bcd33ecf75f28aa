"""Value-based trainers: ValueAgent (a Q-network acting epsilon-greedily) and DQN.

ValueAgent owns one Quality network (one output per discrete action), its
target copy and the epsilon-greedy acting; DQN adds the n-step TD targets and
the Huber / L2 regression on them; DoubleDQN picks the bootstrap action with
the online network and evaluates it with the target network.

Differences from the reference (Trax RL's value trainers), on purpose:
  * the task's buffer really keeps n_replay_epochs epochs (the reference's
    buffer kept only the newest, so "replay" replayed nothing older);
  * the defaults train on real 1-step TD targets (max_slice_length 2 with
    td_k), every real step -- the terminal one included -- can be the trained
    first position of a slice, and padding is masked out (the reference's
    default slices gave no look-ahead row to bootstrap from, never trained
    the last step of an episode, and let padded rows into the loss);
  * by default (target_sync='global') the target network is the standard
    one: held across epochs, in the train state and its checkpoints, and
    copied from the online one whenever the global gradient step count
    reaches a multiple of sync_freq; target_sync='epoch_start' is the
    reference's, which also restarts it from the online weights at the start
    of every epoch's training (its period is then at most the epoch's steps).

Data flow of an epoch: the replay buffer goes to the device once, and one
compiled call runs every gradient step: draw [B, n + 1] slices with the
trainer's key (checkpointed, so the stream replays exactly after a resume),
compute the targets of the first position from the target network (carried
through the loop and synced there), and regress Q(s_t, a_t) on them.
"""
import jax
import jax.numpy as jnp
import numpy as np

from rl import compiler
from rl import ranges
from rl.algorithms import batches
from rl.algorithms import networks
from rl.configurables import configurable
from rl.data import slices
from rl.errors import ConfigError
from rl.learner.acting import Acting
from rl.learner.checks import check_divisible
from rl.learner.checks import check_estimator
from rl.learner.checks import value_scale_of
from rl.learner.fused_epoch import fused_epoch
from rl.learner.fused_epoch import gradient_step
from rl.learner.fused_epoch import variables_of
from rl.learner.trainer import RLTrainer
from rl.nets import heads
from rl.ops import advantages as advantages_lib
from rl.ops.advantages import masked_mean
from rl.ops.q_learning import EpsilonGreedy
from rl.ops.q_learning import double_q_values
from rl.ops.q_learning import greedy_values
from rl.ops.q_learning import q_regression_loss
from rl.ops.q_learning import q_targets
from rl.ops.q_learning import select_q
from rl.ops.q_learning import spread_bootstrap_values
from rl.ops.q_learning import take_rows
from rl.optim import lr_schedules

# The trainers that act in continuous (Box) action spaces, for the error message.
_BOX_TRAINERS = 'PolicyGradientTrainer, A2C, PPO, AWR or SamplingAWR'

# ValueAgent.target_sync's values: the target held across epochs, or restarted at each epoch's start.
_TARGET_SYNCS = ('global', 'epoch_start')


def default_exploration_rate():
  """The reference's default: epsilon(epoch) = max(0.99^epoch, 0.1)."""
  return lr_schedules.multifactor(factors='constant * decay_every', constant=1.0,
                                  decay_factor=0.99, steps_per_decay=1, minimum=0.1)


# -- trainers ---------------------------------------------------------------------------

class ValueAgent(RLTrainer):
  """A Q-network, its target copy and epsilon-greedy acting (discrete actions).

  Subclasses define the regression targets (`_targets_impl`) and the loss
  (`value_loss`).

  Args:
    task: the RLTask.
    value_body: body factory of the Quality network (gin: @MLP); None uses
      Quality's own (gin-bindable) body.
    value_optimizer: optimizer factory (gin: @Adam, @RMSProp, @SGD); None:
      @Adam.
    value_lr_schedule: learning-rate schedule factory (gin: @multifactor or a
      scoped @value/multifactor); None: @multifactor.
    value_batch_size: slices per batch.
    value_train_steps_per_epoch: gradient steps per epoch.
    value_evals_per_epoch: the steps run in this many chunks, with metrics
      computed after each (only affects reporting).
    value_eval_steps: 0 (default): the metrics are those of the training
      batches of the last chunk, computed with the loss; N > 0: they are
      evaluated after each chunk on N fresh batches (the reference's way,
      which compiles a second copy of the loss).
    exploration_rate: schedule factory of epsilon (gin: e.g.
      @exploration_rate/multifactor with factors 'constant * decay_every' and
      a minimum), evaluated at the RL epoch number: the collection of epoch e
      (1, 2, ...) acts with epsilon(e). None: max(0.99^e, 0.1).
    n_eval_episodes: greedy evaluation episodes (RLTrainer's; 0: none).
    only_eval: collect and evaluate only.
    n_replay_epochs: how many of the latest epochs the task's buffer keeps
      and the batches are sampled from. The default 100 makes it a replay
      buffer (some 20,000 steps of CartPole's early epochs): with only the
      newest epoch, the epoch's value_train_steps_per_epoch batches all came
      from its few hundred steps, and DoubleDQN's greedy CartPole return was
      still under 50 after 25 epochs.
    max_slice_length: rows per slice: the trained first step plus
      max_slice_length - 1 rows of look-ahead (n-step targets: n + 1).
    sync_freq: the target network is copied from the online one whenever the
      global gradient step count (the online optimizer's, checkpointed)
      reaches a multiple of this.
    target_sync: 'global' (default): the target network is held across
      epochs (kept in the train state, so a resumed run continues with it)
      and syncs only every sync_freq gradient steps, the standard DQN
      target. 'epoch_start': the reference's, which also restarts it from the
      online weights at the start of every epoch's training, so its real
      period is min(sync_freq, value_train_steps_per_epoch); nothing of it is
      stored between epochs.
    scale_value_targets: the network predicts Q * (1 - gamma), so its outputs
      stay O(reward) whatever the horizon; Q-values are scaled back when used.
    output_dir: the run's folder (set by the runner).
    **kwargs: RLTrainer's arguments (n_interactions_per_epoch, eval_every, ...).
  """

  supports_jax_envs = True

  def __init__(self, task, value_body=None, value_optimizer=None, value_lr_schedule=None,
               value_batch_size=64, value_train_steps_per_epoch=500, value_evals_per_epoch=1,
               value_eval_steps=0, exploration_rate=None, n_eval_episodes=None, only_eval=False,
               n_replay_epochs=100, max_slice_length=2, sync_freq=1000,
               target_sync='global', scale_value_targets=True, output_dir=None, **kwargs):
    super().__init__(task, n_eval_episodes=n_eval_episodes, only_eval=only_eval,
                     output_dir=output_dir, **kwargs)
    name = type(self).__name__
    space = task.action_space
    if not (hasattr(space, 'n') and not hasattr(space, 'nvec')):
      hint = (f' For continuous (Box) actions use {_BOX_TRAINERS}.'
              if hasattr(space, 'low') else '')
      raise ConfigError(f'{name} needs a Discrete action space (one Q-value per action), '
                        f'but {task.env_name} has {space}.{hint}')
    check_divisible(value_train_steps_per_epoch, value_evals_per_epoch,
                    'value_train_steps_per_epoch', 'value_evals_per_epoch')
    if int(sync_freq) < 1:
      raise ConfigError(f'{name}.sync_freq must be >= 1 train step, got {sync_freq}.')
    if target_sync not in _TARGET_SYNCS:
      raise ConfigError(f'{name}.target_sync must be one of '
                        f'{", ".join(map(repr, _TARGET_SYNCS))}, got {target_sync!r}.')
    if int(max_slice_length) < 1:
      raise ConfigError(f'{name}.max_slice_length must be >= 1, got {max_slice_length}.')
    if int(n_replay_epochs) < 1:
      raise ConfigError(f'{name}.n_replay_epochs must be >= 1, got {n_replay_epochs}.')
    ranges.in_range(f'{name}.value_batch_size', value_batch_size, low=1)
    self.n_replay_epochs = int(n_replay_epochs)
    self._n_actions = int(space.n)
    self._value_body = value_body
    self._value_optimizer = value_optimizer
    self._value_lr_schedule = value_lr_schedule
    self._value_batch_size = int(value_batch_size)
    self._value_train_steps = int(value_train_steps_per_epoch)
    self._value_evals = int(value_evals_per_epoch)
    self._value_eval_steps = int(value_eval_steps)
    self._max_slice_length = int(max_slice_length)
    # Every row after the first only bootstraps its targets.
    self._margin = self._max_slice_length - 1
    self._sync_freq = int(sync_freq)
    self._held_target = target_sync == 'global'
    self._value_scale = value_scale_of(self, task, scale_value_targets)
    # The schedule itself for `update`, where it is traced into the epoch's
    # program; and compiled for the epsilon of each epoch's collection,
    # one call per epoch: evaluated op by op, its arithmetic compiled a small
    # program for each operation (half a second of a cold start).
    self._exploration_schedule = (exploration_rate or default_exploration_rate)()
    self._exploration_rate = compiler.jit(self._exploration_schedule)
    self._dist = EpsilonGreedy(self._n_actions)
    self._init_estimator(task, kwargs)

  def _init_estimator(self, task, kwargs):
    """The TD targets' estimator; DQN's (a ValueAgent has none of its own)."""
    del task, kwargs


  def build_networks(self):
    quality_kwargs = {'n_actions': self._n_actions}
    if self._value_body is not None:
      # Passed only when set: an explicit None would hide a `Quality.body` binding.
      quality_kwargs['body'] = self._value_body
    self.value_net = networks.build_network(
        self.task, heads.Quality(**quality_kwargs), self._value_optimizer,
        self._value_lr_schedule, 'value_loss', (networks.example_observation(self.task),),
        seed_offset=1)
    return {'value': self.value_net}, Acting('value', self._dist,
                                             output_fn=lambda q: q * self._value_scale)

  def initial_extra(self, nets):
    # The held target network as the last epoch left it (it lags the online
    # network by up to sync_freq - 1 steps): checkpointed with the agent. An
    # epoch_start target is rebuilt from the online weights every epoch, so
    # there is nothing to keep.
    return {'target': nets['value'].variables} if self._held_target else {}

  # -- exploration and acting -------------------------------------------------------

  def exploration_rate(self, epoch):
    """epsilon of the collection in RL epoch `epoch` (a Python float)."""
    return float(self._exploration_rate(np.int32(epoch)))

  def sampling_args(self, temperature, epoch):
    """Epsilon for `EpsilonGreedy.sample`: `epoch`'s at temperature > 0, else 0.

    Epsilon is a function of the epoch counter only, so a resumed run acts
    with exactly the epsilon the uninterrupted one would have used.
    """
    return (np.float32(self.exploration_rate(epoch) if temperature > 0 else 0.0),)

  # -- batches and targets --------------------------------------------------------------

  def _q_values(self, variables, obs):
    """Q-values in return units, [B, L, n_actions]."""
    return self.value_net.model.apply(variables, obs) * self._value_scale

  def targets(self, target_variables, online_variables, fields):
    """Targets [B, 1] (return units) of the first position of each slice (pure)."""
    raise NotImplementedError

  def draw_value_slices(self, data, key):
    """Which rows a batch of [B, n + 1] slices holds.

    `data` is (the replay's SliceData, its draw table), as `update` hands
    it over: the table is made once per epoch rather than per batch.

    margin = max_slice_length - 1 gives a trajectory of T steps exactly T
    start positions (rows + margin - max_slice_length = T): every real step,
    the last (terminal or truncated) one included, is trained.
    """
    data, table = data
    return slices.draw(data, key, self._value_batch_size, self._max_slice_length,
                       margin=self._margin, table=table)

  def value_batch(self, target, online, rows):
    """The ValueBatch of the slices' rows: first steps and their TD targets from the
    `target` and `online` variables (pure)."""
    targets = self.targets(target, online, rows)
    return batches.ValueBatch(rows['observation'][:, :1],
                              rows['action'][:, :1].astype(jnp.int32),
                              targets / self._value_scale, rows['mask'][:, :1])

  def value_loss(self, variables, batch):
    """(loss, metrics) of the Q-network with `variables` on a ValueBatch."""
    q_values = self.value_net.model.apply(variables, batch.observation)
    loss = self.td_loss(q_values, batch)
    scale = self._value_scale
    return loss, {
        'value_loss': loss,
        'value_mean': masked_mean(select_q(q_values, batch.action) * scale, batch.mask),
        'returns_mean': masked_mean(batch.target * scale, batch.mask),
    }

  def td_loss(self, q_values, batch):
    raise NotImplementedError

  # -- the epoch ------------------------------------------------------------------------

  def synced(self, target, variables, step):
    """The target network after online step `step`: synced at multiples of sync_freq."""
    synced = step % self._sync_freq == 0
    return jax.tree_util.tree_map(lambda new, old: jnp.where(synced, new, old),
                                  variables, target)

  def value_step(self, carry, rows, key):
    """A gradient step of the Q network on its TD targets, then the target's sync (pure)."""
    del key
    nets, target = carry
    batch = self.value_batch(target, variables_of(nets['value']), rows)
    value, stepped = gradient_step(self.value_net.tx, nets['value'], self.value_loss, batch)
    target = self.synced(target, variables_of(value), value['step'])
    return ({**nets, 'value': value}, target), {'value': stepped}

  def value_metrics(self, carry, rows, key):
    del key
    nets, target = carry
    online = variables_of(nets['value'])
    return {'value': self.value_loss(online, self.value_batch(target, online, rows))[1]}

  def value_data(self, data=None):
    """What the value network's epoch draws from: (the replay's SliceData, its draw_table).

    `data`: the replay's SliceData (default: the task's); pure given it.
    """
    data = self.task.slice_data() if data is None else data
    return data, slices.draw_table(data, self._max_slice_length, self._margin)

  def epoch_data(self, epoch):
    return {'value': self.task.slice_data(), 'epoch': np.int32(epoch)}

  def rollout_data(self, newest, replay, epoch):
    del newest
    return {'value': replay, 'epoch': epoch}

  def update(self, state, data):
    # The epoch's training starts from the held target (or, epoch_start, a
    # fresh copy of the online network), which syncs whenever the global step
    # count reaches a multiple of sync_freq.
    start = state.extra['target'] if self._held_target else variables_of(state.nets['value'])
    (nets, target), key, records = fused_epoch(
        self.value_step, (state.nets, start), self.value_data(data['value']), state.train_key,
        draw=self.draw_value_slices, take=slices.take_slices, evaluate=self.value_metrics,
        n_chunks=self._value_evals, steps_per_chunk=self._value_train_steps // self._value_evals,
        n_eval_steps=self._value_eval_steps, batch_sharding=self.value_net.batch_sharding)
    state = state._replace(nets=nets, train_key=key)
    if self._held_target:
      state = state._replace(extra=dict(state.extra, target=target))
    return state, records, {'exploration_rate': self._exploration_schedule(data['epoch'])}


@configurable(denylist=['task', 'output_dir'])
class DQN(ValueAgent):
  """Deep Q-learning on n-step TD targets from the target network.

  Args:
    advantage_estimator: gin factory (@td_k for n-step targets with
      n = max_slice_length - 1; @monte_carlo regresses on the stored returns);
      None: @td_k.
    smoothl1loss: Huber (smooth L1) loss; False: squared error.
    double_dqn: bootstrap from Q_target(s, argmax_a Q_online(s, a)).
    **kwargs: ValueAgent's and RLTrainer's arguments.
  """

  def __init__(self, task, advantage_estimator=None, smoothl1loss=True, double_dqn=False,
               **kwargs):
    self._smooth = bool(smoothl1loss)
    self._double = bool(double_dqn)
    self._estimator_factory = advantage_estimator or advantages_lib.td_k
    super().__init__(task, **kwargs)

  def _init_estimator(self, task, kwargs):
    self._estimator = self._estimator_factory(gamma=task.gamma, margin=self._margin)
    check_estimator(self, self._estimator, 'max_slice_length must be >= 2 (n-step targets use '
                    f'n + 1; got {self._max_slice_length})', task, kwargs,
                    'use n-step targets (@td_k)')

  def targets(self, target_variables, online_variables, fields):
    obs = fields['observation']
    bootstrap_row = self._estimator.bootstrap_row
    if bootstrap_row is not None:
      # n-step (and Monte-Carlo) targets read the values of two rows of a
      # slice: its first and the one they bootstrap from, so the networks run
      # on those two rows only; the targets are those of all n + 1 rows.
      rows = bootstrap_row(fields['done'], fields['mask'])[:, 0]
      obs = jnp.stack([obs[:, 0], take_rows(obs, rows)], axis=1)
    q_target = self._q_values(target_variables, obs)
    if self._double:
      values = double_q_values(q_target, self._q_values(online_variables, obs))
    else:
      values = greedy_values(q_target)
    if bootstrap_row is not None:
      values = spread_bootstrap_values(values, rows, fields['reward'].shape[1])
    return q_targets(self._estimator, fields['reward'], fields['return_'], values,
                     fields['done'], fields['mask'])

  def td_loss(self, q_values, batch):
    return q_regression_loss(q_values, batch.action, batch.target, batch.mask, self._smooth)


@configurable(denylist=['task', 'output_dir'])
class DoubleDQN(DQN):
  """DQN whose targets use the online network's greedy action (van Hasselt et al.)."""

  fixed_parameters = ('double_dqn',)

  def __init__(self, task, **kwargs):
    kwargs['double_dqn'] = True
    super().__init__(task, **kwargs)
