"""Install `rl`: a gin-configured JAX experiment runner for reinforcement learning."""
from setuptools import find_packages, setup

setup(
    name="rl",
    version="0.1.0",
    description="Gin-configured reinforcement-learning experiment runner on JAX, flax and gymnasium.",
    python_requires=">=3.11",
    packages=find_packages(include=["rl", "rl.*", "launch", "launch.*"]),
    install_requires=[
        # Ranges start at the versions this project was tested with; the upper
        # bounds stop at the next major line, whose APIs we have not tried.
        "jax>=0.10.2,<0.11",
        "flax>=0.12.8,<0.13",
        "optax>=0.2.8,<0.3",
        "orbax-checkpoint>=0.12.8,<0.13",
        "gin-config>=0.5.0,<0.6",
        "gymnasium>=1.4.0,<2",
        "numpy>=2.0,<3",
        "absl-py>=2.1",
        # TensorBoard event files without TensorFlow: tensorboardX only needs protobuf.
        "tensorboardX>=2.6.2,<3",
        # Sweep files (launch/sweep.py) are YAML, as the reference's were.
        "pyyaml>=6",
    ],
    extras_require={
        # rl.report and benchmarks/learning.py draw learning curves with matplotlib.
        "plots": ["matplotlib>=3.8"],
        # launch.sweep --backend=ray: one Ray task per run, on a cluster or a local instance.
        "ray": ["ray>=2.40,<3"],
        # rl.evaluate --video: gymnasium's RecordVideo writes mp4 through moviepy (which
        # brings its own ffmpeg); the classic-control envs draw their frames with pygame.
        "video": ["moviepy>=2.1,<3", "pygame>=2.5"],
        # The tests cover all of the above.
        "test": ["pytest>=8", "matplotlib>=3.8", "ray>=2.40,<3", "moviepy>=2.1,<3",
                 "pygame>=2.5"],
    },
)
