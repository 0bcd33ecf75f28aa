"""PPO: proximal policy optimisation with the clipped surrogate (Schulman et al., 2017).

The update is ActorCriticTrainer's (rl.algorithms.actor_critic): the value
network regresses on GAE returns, then the policy takes
policy_train_steps_per_epoch gradient steps on `ppo_loss`. PPOJoint
(rl.algorithms.joint) applies the same loss to a joint network.
"""
import jax
import jax.numpy as jnp

from rl import ranges
from rl.algorithms.actor_critic import ActorCriticTrainer
from rl.configurables import configurable
from rl.ops.advantages import masked_mean
from rl.ops.advantages import masked_means


def clipped_surrogate(log_probs, old_log_probs, advantages, epsilon):
  """Per-step min(rho A, clip(rho, 1 - eps, 1 + eps) A), rho = pi(a|s) / pi_old(a|s)."""
  ratio = jnp.exp(log_probs - old_log_probs)
  clipped = jnp.clip(ratio, 1.0 - epsilon, 1.0 + epsilon)
  return jnp.minimum(ratio * advantages, clipped * advantages)


def ppo_loss(log_probs, old_log_probs, advantages, entropy, mask, epsilon, entropy_coeff):
  """PPO-clip: -E[clipped surrogate] - c_H E[H], each a mean over the real steps."""
  advantages = jax.lax.stop_gradient(advantages)
  objective = clipped_surrogate(log_probs, old_log_probs, advantages, epsilon)
  return -masked_mean(objective, mask) - entropy_coeff * masked_mean(entropy, mask)


def ppo_diagnostics(log_probs, old_log_probs, mask, epsilon):
  """Clip fraction and approximate KL (mean of (rho - 1) - log rho, always >= 0)."""
  log_ratio = log_probs - old_log_probs
  ratio = jnp.exp(log_ratio)
  return masked_means(
      mask,
      probs_ratio_mean=ratio,
      clip_fraction=(jnp.abs(ratio - 1.0) > epsilon).astype(ratio.dtype),
      approximate_kl_divergence=(ratio - 1.0) - log_ratio)


@configurable(denylist=['task', 'output_dir'])
class PPO(ActorCriticTrainer):
  """Proximal policy optimisation with the clipped surrogate (Schulman et al., 2017).

  Args:
    epsilon: clipping range of the probability ratio.
    entropy_coeff: weight of the entropy bonus.
    **kwargs: ActorCriticTrainer's arguments.
  """

  on_policy = True

  def __init__(self, task, epsilon=0.2, entropy_coeff=0.01, **kwargs):
    ranges.in_range(f'{type(self).__name__}.epsilon', epsilon, low=0, low_open=True,
                    why='a clip range of the probability ratio')
    self.epsilon = epsilon
    self.entropy_coeff = entropy_coeff
    super().__init__(task, **kwargs)

  def objective(self, terms, extra):
    del extra
    epsilon = self.traced('epsilon', self.epsilon)
    loss = ppo_loss(terms.log_probs, terms.old_log_probs, terms.advantages, terms.entropy,
                    terms.mask, epsilon, self.traced('entropy_coeff', self.entropy_coeff))
    return loss, ppo_diagnostics(terms.log_probs, terms.old_log_probs, terms.mask, epsilon)
