"""AWR: advantage-weighted regression (Peng et al., 2019) with separate networks.

Off-policy: the networks train on the last n_replay_epochs epochs. The update
is ActorCriticTrainer's (rl.algorithms.actor_critic); the policy regresses on
the taken actions weighted by rl.ops.losses.awr_weights.
"""

from rl import ranges
from rl.algorithms.actor_critic import ActorCriticTrainer
from rl.configurables import configurable
from rl.ops import losses


@configurable(denylist=['task', 'output_dir'])
class AWR(ActorCriticTrainer):
  """Advantage-weighted regression (Peng et al., 2019); off-policy: replays n_replay_epochs.

  Args:
    beta: temperature of the exponentiated advantages.
    w_max: cap on the weights.
    thresholds: optional ((percentile, weight, minimum), ...) step weights
      instead of exp(A / beta).
    **kwargs: ActorCriticTrainer's arguments.
  """

  def __init__(self, task, beta=1.0, w_max=20.0, thresholds=None, **kwargs):
    name = type(self).__name__
    ranges.in_range(f'{name}.beta', beta, low=0, low_open=True, why='it divides the advantages')
    ranges.in_range(f'{name}.w_max', w_max, low=0, low_open=True)
    self.beta = beta
    self.w_max = w_max
    self.thresholds = tuple(tuple(t) for t in thresholds) if thresholds else None
    super().__init__(task, **kwargs)

  def objective(self, terms, extra):
    del extra
    weights = losses.awr_weights(terms.advantages, terms.mask, self.beta, self.w_max,
                                 self.thresholds)
    return losses.awr_loss(terms.log_probs, weights, terms.mask), losses.awr_weight_stats(
        weights, terms.mask)
