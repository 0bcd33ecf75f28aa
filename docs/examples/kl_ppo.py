"""PPO with an adaptive KL penalty in place of the clip (Schulman et al., 2017, section 4).

The worked example of docs/extending.md: an algorithm variant in a file of its
own, which a config loads with a gin `import` (docs/examples/kl_ppo_cartpole.gin).
"""
import gin
import jax
import jax.numpy as jnp

from rl.algorithms.ppo import PPO
from rl.algorithms.ppo import ppo_diagnostics
from rl.ops import losses


def sample_kl(log_probs, old_log_probs):
  """Per-step estimate (r - 1) - log r of KL(pi_old || pi_new), r = pi_new(a|s) / pi_old(a|s).

  Its mean over actions drawn from pi_old is the KL; unlike -log r, which has
  the same mean, it is never negative and varies less.
  """
  log_ratio = log_probs - old_log_probs
  return (jnp.exp(log_ratio) - 1.0) - log_ratio


def kl_penalty_loss(log_probs, old_log_probs, advantages, entropy, mask, beta, entropy_coeff):
  """-E[r A] + beta E[KL] - entropy_coeff E[H], each a mean over the real steps (mask 1)."""
  advantages = jax.lax.stop_gradient(advantages)
  ratio = jnp.exp(log_probs - old_log_probs)
  return (-losses.masked_mean(ratio * advantages, mask)
          + beta * losses.masked_mean(sample_kl(log_probs, old_log_probs), mask)
          - entropy_coeff * losses.masked_mean(entropy, mask))


def adapted_beta(beta, kl, kl_target):
  """The paper's rule: beta doubles if kl > 1.5 kl_target, halves if kl < kl_target / 1.5."""
  return beta * jnp.where(kl > 1.5 * kl_target, 2.0, jnp.where(kl < kl_target / 1.5, 0.5, 1.0))


@gin.configurable(denylist=['task', 'output_dir'])
class KLPPO(PPO):
  """PPO whose policy loss penalises the KL to the collecting policy instead of clipping.

  A subclass of PPO, so it takes PPO's arguments and, through gin, PPO's
  bindings: an included PPO config configures it; KLPPO.* bindings win.

  Args:
    beta: the KL penalty's weight in the first epoch.
    kl_target: after each epoch beta adapts toward this KL (adapted_beta),
      measured by the policy's last metrics; 0 keeps beta fixed. beta is
      carried in the TrainState's `extra`, so checkpoints hold it.
    **kwargs: PPO's arguments: entropy_coeff weighs the entropy bonus;
      epsilon only sets the range of the clip_fraction metric.
  """

  def __init__(self, task, beta=1.0, kl_target=0.01, **kwargs):
    super().__init__(task, **kwargs)
    self.initial_beta = beta
    self.kl_target = kl_target

  def initial_extra(self, networks):
    return dict(super().initial_extra(networks), beta=jnp.float32(self.initial_beta))

  def objective(self, terms, extra):
    loss = kl_penalty_loss(terms.log_probs, terms.old_log_probs, terms.advantages, terms.entropy,
                           terms.mask, extra['beta'], self.entropy_coeff)
    return loss, ppo_diagnostics(terms.log_probs, terms.old_log_probs, terms.mask, self.epsilon)

  def update(self, state, data):
    beta = state.extra['beta']  # the beta this epoch's policy loss trains with
    state, results, metrics = super().update(state, data)
    if self.kl_target:
      kl = results['policy'].metrics['approximate_kl_divergence']
      state = state._replace(extra=dict(state.extra, beta=adapted_beta(beta, kl, self.kl_target)))
    return state, results, dict(metrics, kl_beta=beta)
