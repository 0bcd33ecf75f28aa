"""Install `rl`: a gin-configured JAX experiment runner for reinforcement learning."""
from setuptools import find_packages, setup

# The optional envs' packages, one extra each (rl.envs.registry names the extra an env
# lacks). Not gymnasium's own extras: its box2d extra also brings pygame-ce, which
# clashes with the video extra's pygame, and its atari extra lacks OpenCV.
ATARI = ["ale-py>=0.12.1,<0.13", "opencv-python-headless>=5.0,<6"]
MINATAR = ["minatar>=1.0.15,<2"]
MUJOCO = ["mujoco>=3.12,<3.16"]
BOX2D = ["box2d>=2.3.10,<2.4"]
# JAX-native envs (RLTask.env = 'gymnax:CartPole-v1'): gymnax, the field's package of
# environments written in JAX (classic control, MinAtar, bsuite), whose steps compile
# into the same XLA program as the policy and the updates. It pins gymnasium below
# 1.4, hence gymnasium's range below, and brings matplotlib, seaborn and pandas (about
# 190 MB on their own; the test extra has them already), hence an extra. gymnax imports
# six without declaring it, so the extra brings six too.
GYMNAX = ["gymnax>=1.0.1,<2", "six>=1.16"]
# The documentation site (mkdocs.yml, docs/): MkDocs builds it, with the Material theme
# (which brings the pymdownx extensions the pages use); tests/test_docs.py builds it strictly.
DOCS = ["mkdocs>=1.6,<2", "mkdocs-material>=9.5,<10"]

setup(
    name="rl",
    version="0.1.0",
    description="Gin-configured reinforcement-learning experiment runner on JAX, flax and gymnasium.",
    license="Apache-2.0",
    python_requires=">=3.11",
    packages=find_packages(include=["rl", "rl.*", "launch", "launch.*"]),
    install_requires=[
        # Ranges start at the versions this project was tested with; the upper
        # bounds stop at the next major line, whose APIs we have not tried.
        "jax>=0.10.2,<0.11",
        # jax's dtype extension, imported by every process that imports jax. 0.7.0
        # takes 0.6 s to import where 0.6.0 takes 5 ms (`python -X importtime -c
        # "import ml_dtypes"` on the 2-core machine): a tenth of a CartPole run, and of
        # every test that starts rl.run. jax 0.10 asks for >= 0.5.
        "ml_dtypes>=0.5,<0.7",
        "flax>=0.12.8,<0.13",
        "optax>=0.2.8,<0.3",
        "orbax-checkpoint>=0.12.8,<0.13",
        "gin-config>=0.5.0,<0.6",
        # 1.3: gymnax (the gymnax extra) pins gymnasium below 1.4.
        "gymnasium>=1.3.0,<2",
        "numpy>=2.0,<3",
        "absl-py>=2.1",
        # TensorBoard event files without TensorFlow: tensorboardX only needs protobuf.
        "tensorboardX>=2.6.2,<3",
        # Sweep files (launch/sweep.py) are YAML, as the reference's were.
        "pyyaml>=6",
    ],
    # Extras' names are lower-case letters and digits, which PEP 685's normalisation
    # leaves as they are: setuptools writes the normalised name into the metadata, and
    # pip 23.2 (a fresh python3.11 venv's) finds an extra only by that spelling.
    extras_require={
        # rl.report and benchmarks/learning.py draw learning curves with matplotlib.
        "plots": ["matplotlib>=3.8"],
        # launch.sweep --backend=ray: one Ray task per run, on a cluster or a local instance.
        "ray": ["ray>=2.40,<3"],
        # rl.evaluate --video: gymnasium's RecordVideo writes mp4 through moviepy (which
        # brings its own ffmpeg); the classic-control envs draw their frames with pygame.
        "video": ["moviepy>=2.1,<3", "pygame>=2.5"],
        # Atari 2600 games (ALE/*-v5): the Arcade Learning Environment, which ships the
        # ROMs; gymnasium's AtariPreprocessing resizes frames with OpenCV (headless: no
        # GUI libraries needed).
        "atari": ATARI,
        # MinAtar/*-v0, -v1: the MinAtar games (it registers them with gymnasium).
        "minatar": MINATAR,
        # gymnasium's MuJoCo envs (HalfCheetah-v5, ...). 3.16 deprecates an attribute of
        # gymnasium's models (settotalmass) and warns about it on every env built.
        "mujoco": MUJOCO,
        # gymnasium's Box2D envs (LunarLander-v3, BipedalWalker-v3): pybox2d, which has
        # wheels (box2d-py needs swig and a compiler). Their renderers use the video
        # extra's pygame.
        "box2d": BOX2D,
        # JAX-native envs: gymnax (see GYMNAX).
        "gymnax": GYMNAX,
        # The documentation site: mkdocs build --strict (see DOCS).
        "docs": DOCS,
        # The tests cover all of the above, installed by their extras' names, as a user
        # installs them; pytest-xdist runs the tests in two worker processes. griffe
        # (griffelib, mkdocstrings' docstring parser) reads the docstrings that
        # python -m rl.parameters_doc turns into docs/parameters.md, whose test checks it.
        "test": ["pytest>=8", "pytest-xdist>=3.6", "griffelib>=2.4,<3",
                 "rl[plots,ray,video,atari,minatar,mujoco,box2d,gymnax,docs]"],
    },
)
