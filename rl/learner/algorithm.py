"""Algorithm: what the Learner asks of an algorithm, and nothing more.

Every trainer in rl.algorithms implements it (through rl.learner.trainer.
RLTrainer, which supplies the defaults marked below). The Learner builds the
networks, acts, collects, calls `update` and checkpoints; the algorithm holds
its hyperparameters, turns stored data into batches and computes its loss.
"""
from typing import Any, Protocol

from rl.learner.acting import Acting
from rl.learner.state import TrainState


class Algorithm(Protocol):
  """The interface between an algorithm and the Learner.

  Attributes:
    supports_jax_envs: whether `rollout_data` exists (JAX-native envs).
    metric_prefixes: {network: prefix} of the network's learning_rate,
      gradients_l2 and steps_per_second in the epoch's metrics.
    n_replay_epochs: the latest epochs of trajectories the task keeps for the
      algorithm (1: the newest only); the task's storage is built from it.
  """
  supports_jax_envs: bool
  n_replay_epochs: int
  metric_prefixes: dict

  def build_networks(self) -> tuple[dict, Acting]:
    """({name: rl.learner.network_trainer.Trainer}, how the algorithm acts).

    The networks' initial states are made afterwards, all in one compiled call.
    """

  def initial_extra(self, networks: dict) -> dict:
    """Arrays besides the networks carried in the TrainState (default: none)."""

  def sampling_args(self, temperature: float, epoch: int) -> tuple:
    """Extra traced arguments of the acting distribution's `sample` (default: none)."""

  def epoch_data(self, epoch: int) -> Any:
    """What `update` trains on this epoch, from the task's stored trajectories."""

  def rollout_data(self, newest: Any, replay: Any, epoch: Any) -> Any:
    """The same on JAX-native envs, from this epoch's rollout and the replay (traced)."""

  def update(self, state: TrainState, data: Any) -> tuple[TrainState, dict, dict]:
    """One epoch's training, pure: (state, {network: StepRecord}, {name: scalar metric}).

    Every network with a normaliser holds the acting model's statistics in
    `state` already (state.with_acting_statistics), and the Learner makes each
    network's EpochResult of its StepRecord (fused_epoch.epoch_result).
    """
