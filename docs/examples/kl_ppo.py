"""PPO with an adaptive KL penalty for the clip (Schulman et al., 2017, 4): docs/extending.md."""
import gin
import jax
import jax.numpy as jnp

from rl.algorithms.ppo import PPO
from rl.algorithms.ppo import ppo_diagnostics
from rl.ops.advantages import masked_mean


def kl_penalty_loss(log_probs, old_log_probs, advantages, entropy, mask, beta, entropy_coeff):
  """-E[r A] + beta E[KL] - entropy_coeff E[H], means over the real steps (mask 1), r = pi_new /
  pi_old; KL per step is (r - 1) - log r: never negative, its mean over pi_old's actions the KL."""
  ratio, log_ratio = jnp.exp(log_probs - old_log_probs), log_probs - old_log_probs
  return (-masked_mean(ratio * jax.lax.stop_gradient(advantages), mask)
          + beta * masked_mean((jnp.exp(log_ratio) - 1.0) - log_ratio, mask)
          - entropy_coeff * masked_mean(entropy, mask))


def adapted_beta(beta, kl, kl_target):
  """beta doubled if kl > 1.5 kl_target, halved if kl < kl_target / 1.5, else kept."""
  return beta * jnp.where(kl > 1.5 * kl_target, 2.0, jnp.where(kl < kl_target / 1.5, 0.5, 1.0))


@gin.configurable(denylist=['task', 'output_dir'])
class KLPPO(PPO):
  """PPO's arguments and bindings, and the penalty's weight beta (carried in state.extra)
  adapted after each epoch toward the KL kl_target (0: beta stays fixed)."""

  def __init__(self, task, beta=1.0, kl_target=0.01, **kwargs):
    super().__init__(task, **kwargs)
    self.initial_beta, self.kl_target = beta, kl_target

  def initial_extra(self, networks):
    return dict(super().initial_extra(networks), beta=jnp.float32(self.initial_beta))

  def objective(self, terms, extra):
    loss = kl_penalty_loss(terms.log_probs, terms.old_log_probs, terms.advantages, terms.entropy,
                           terms.mask, extra['beta'], self.entropy_coeff)
    return loss, ppo_diagnostics(terms.log_probs, terms.old_log_probs, terms.mask, self.epsilon)

  def update(self, state, data):
    beta = state.extra['beta']  # the beta this epoch's policy loss trains with
    state, records, metrics = super().update(state, data)
    if self.kl_target:
      kl = records['policy'].metrics['approximate_kl_divergence']
      state = state._replace(extra=dict(state.extra, beta=adapted_beta(beta, kl, self.kl_target)))
    return state, records, dict(metrics, kl_beta=beta)
