"""A2C: advantage actor-critic (Mnih et al., 2016) with separate policy and value networks.

The update is ActorCriticTrainer's (rl.algorithms.actor_critic); the policy
loss is rl.ops.losses.a2c_loss.
"""

from rl.algorithms.actor_critic import ActorCriticTrainer
from rl.configurables import configurable
from rl.ops import losses


@configurable(denylist=['task', 'output_dir'])
class A2C(ActorCriticTrainer):
  """Advantage actor-critic (Mnih et al., 2016).

  Args:
    entropy_coeff: weight of the entropy bonus.
    **kwargs: ActorCriticTrainer's arguments.
  """

  on_policy = True

  def __init__(self, task, entropy_coeff=0.01, **kwargs):
    self.entropy_coeff = entropy_coeff
    super().__init__(task, **kwargs)

  def objective(self, terms, extra):
    del extra
    return losses.a2c_loss(terms.log_probs, terms.advantages, terms.entropy, terms.mask,
                           self.traced('entropy_coeff', self.entropy_coeff)), {}
