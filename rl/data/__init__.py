"""Storage: trajectories on the host, slices and stacked frames on the device, checkpoints."""
