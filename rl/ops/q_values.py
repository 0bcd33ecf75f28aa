"""Turning Q-values of sampled actions into state values (pure, jit-able)."""
import jax
import jax.numpy as jnp

AGGREGATES = ('mean', 'max', 'softmax', 'logsumexp')


def aggregate(q_values, log_probs, mode, temperature=1.0, sample_all=False):
  """State values from Q-values of n actions per state.

  Args:
    q_values: [B, n, L] Q(s, a_i) for n actions per state.
    log_probs: [B, n, L] log-probabilities of those actions under the policy
      that sampled them (used by 'mean' when every action was enumerated).
    mode: 'max' (greedy), 'softmax' (sum of softmax(Q/T) Q), 'logsumexp'
      (T (logsumexp(Q/T) - log n), a soft maximum), or 'mean' (the policy's
      expected Q: probability-weighted when all actions were enumerated,
      otherwise a plain mean over the samples, which are already drawn from
      the policy).
    temperature: T of 'softmax' and 'logsumexp'.
    sample_all: whether the n actions are all the discrete actions.

  Returns:
    [B, L] state values.
  """
  n = q_values.shape[1]
  if mode == 'max':
    return jnp.max(q_values, axis=1)
  if mode == 'softmax':
    return jnp.sum(jax.nn.softmax(q_values / temperature, axis=1) * q_values, axis=1)
  if mode == 'logsumexp':
    return temperature * (jax.nn.logsumexp(q_values / temperature, axis=1) - jnp.log(n))
  if mode == 'mean':
    if sample_all:
      return jnp.sum(jnp.exp(log_probs) * q_values, axis=1)
    return jnp.mean(q_values, axis=1)
  raise ValueError(f"unknown q_value_aggregate '{mode}'; use one of {', '.join(AGGREGATES)}.")
