"""benchmarks/arithmetic_bound.py counts an MLP PPO setting's multiply-adds as by hand."""
import benchmark_scripts

arithmetic_bound = benchmark_scripts.load('arithmetic_bound')


def test_a_network_s_forward_and_backward_multiply_adds():
  # 3 -> 2 -> 1: forward 3*2 + 2*1 = 8; backward 8 weight gradients' + 2*1 for the hidden
  # layer's input gradient (none for the observation's).
  assert arithmetic_bound.network_macs((2,), 3, 1) == (8, 8 + 8 + 2)


def test_an_env_step_acts_with_both_networks_and_trains_both_each_pass():
  # Policy 3 -> 2 -> 4: forward 6 + 8 = 14, training 14 + 14 + 8 = 36.
  # Value 3 -> 2 -> 1: forward 8, training 18. Two passes: 14 + 8 + 2 * (36 + 18).
  assert arithmetic_bound.macs_per_env_step((2,), 2, 3, 4) == 14 + 8 + 2 * (36 + 18)
