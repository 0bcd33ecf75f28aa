"""Multi-run launching: seed and hyper-parameter sweeps over `python -m rl.run`."""
