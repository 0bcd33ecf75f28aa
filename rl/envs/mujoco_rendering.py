"""Which OpenGL platform MuJoCo renders with (MUJOCO_GL) when recording a video.

MuJoCo reads MUJOCO_GL once, when `mujoco` is imported, and without it uses
GLFW, which needs a display: on a headless machine (a server, a container,
CI) rendering then fails with a fatal error deep in MuJoCo. So, when there is
no display and MUJOCO_GL is unset, `choose_gl` picks a platform that renders
without one: EGL (libEGL: Mesa's or a GPU driver's), else OSMesa (software).
A MUJOCO_GL the user set is kept.
"""
import ctypes.util
import os
import sys

# The libraries MuJoCo loads for each headless platform, in order of preference.
HEADLESS_PLATFORMS = (('egl', 'EGL'), ('osmesa', 'OSMesa'))
GL_HINT = ('set MUJOCO_GL=egl (needs libEGL, e.g. apt install libegl1) or MUJOCO_GL=osmesa '
           '(needs libOSMesa, e.g. apt install libosmesa6), or run where there is a display')


def has_display(environ):
  return bool(environ.get('DISPLAY') or environ.get('WAYLAND_DISPLAY'))


def choose_gl(environ=None):
  """Sets MUJOCO_GL in `environ` (os.environ) for a machine without a display; returns it.

  Returns None, changing nothing, when MUJOCO_GL is set, a display exists,
  mujoco was imported already (too late to choose) or no headless library is
  found (then rendering fails and `render_error` says what to set).
  """
  environ = os.environ if environ is None else environ
  if 'MUJOCO_GL' in environ or has_display(environ) or 'mujoco' in sys.modules:
    return None
  for platform, library in HEADLESS_PLATFORMS:
    if ctypes.util.find_library(library):
      environ['MUJOCO_GL'] = platform
      return platform
  return None


def render_error(env_id, error):
  """The one line for a MuJoCo env that cannot render (`error`: mujoco's FatalError or other)."""
  reason = (str(error).splitlines() or [type(error).__name__])[0][:160]
  platform = os.environ.get('MUJOCO_GL', 'unset, so glfw')
  return (f'MuJoCo cannot render {env_id!r} for the video with MUJOCO_GL={platform} '
          f'({reason}); {GL_HINT}.')


def is_render_error(error):
  """Whether `error` is MuJoCo failing to render (no OpenGL platform or context)."""
  mujoco = sys.modules.get('mujoco')
  return mujoco is not None and isinstance(error, mujoco.FatalError)
