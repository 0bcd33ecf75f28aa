"""The batches the trainers' networks train on: named tuples of [B, L, ...] arrays.

Each is drawn on the device from the epoch's slices (rl.data.slices) by its
trainer's batch function, then handed to the loss, which reads fields by name.
"""
from typing import NamedTuple

import jax


class ReturnsBatch(NamedTuple):
  """REINFORCE: the steps and their discounted returns."""
  observation: jax.Array
  action: jax.Array
  return_: jax.Array
  mask: jax.Array


class PolicyBatch(NamedTuple):
  """Actor-critic policy steps with their advantages and the acting policy's inputs."""
  observation: jax.Array
  action: jax.Array
  advantage: jax.Array
  dist_inputs: jax.Array  # of the policy that acted (the "old" policy)
  mask: jax.Array


class JointBatch(NamedTuple):
  """A joint network's steps with the advantages and value targets computed for its chunk."""
  observation: jax.Array
  action: jax.Array
  advantage: jax.Array
  value_target: jax.Array  # V + A, in returns (not scaled by 1 - gamma)
  dist_inputs: jax.Array  # of the policy that acted (the "old" policy)
  mask: jax.Array


class SampledQBatch(NamedTuple):
  """SamplingAWR: n actions sampled per state, [B, n, L], with their Q and log-probs."""
  observation: jax.Array  # [B, L, ...]
  action: jax.Array
  q_value: jax.Array
  log_prob: jax.Array  # under the acting policy
  mask: jax.Array


class ValueBatch(NamedTuple):
  """Regression targets of a value (or Q) network on the first L steps of slices."""
  observation: jax.Array
  action: jax.Array  # fed to Q networks; unused by V networks
  target: jax.Array
  mask: jax.Array
