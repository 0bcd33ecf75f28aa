"""The documentation: the MkDocs site builds strictly, and every relative link resolves.

GitHub renders README.md and docs/*.md from the repository, where a relative link
must name an existing file; `mkdocs build --strict` also fails on a page missing from
the nav, a link to a missing page and a link to a missing heading (mkdocs.yml).
"""
import importlib.util
import os
import re
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# Fenced code blocks and inline code spans hold commands, not links.
_FENCE = re.compile(r'^(```|~~~).*?^\1', re.S | re.M)
_CODE_SPAN = re.compile(r'(`+).*?\1', re.S)
_LINK = re.compile(r'!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+"[^"]*")?\s*\)')


def markdown_files():
  files = [os.path.join(ROOT, 'README.md')]
  for folder, _, names in os.walk(os.path.join(ROOT, 'docs')):
    files += [os.path.join(folder, n) for n in sorted(names) if n.endswith('.md')]
  return files


def relative_links(path):
  """The link targets of a markdown file outside code, without their #fragment."""
  with open(path, encoding='utf-8') as f:
    text = _CODE_SPAN.sub('', _FENCE.sub('', f.read()))
  for target in _LINK.findall(text):
    if re.match(r'^[a-z][a-z0-9+.-]*:', target, re.I) or target.startswith('#'):
      continue  # http:, mailto:, ... and links within the page
    yield target.split('#', 1)[0]


def test_link_finder_sees_links_and_skips_code(tmp_path):
  path = tmp_path / 'page.md'
  path.write_text('[a](docs/x.md#h) ![b](docs/c.png) [w](https://x.org) [p](#top) '
                  '`[c](no.md)`\n```\n[d](no2.md)\n```\n', encoding='utf-8')
  assert list(relative_links(path)) == ['docs/x.md', 'docs/c.png']


def test_every_relative_link_resolves():
  missing = []
  for path in markdown_files():
    for target in relative_links(path):
      resolved = os.path.normpath(os.path.join(os.path.dirname(path), target))
      if not os.path.exists(resolved):
        missing.append(f'{os.path.relpath(path, ROOT)}: {target}')
  assert not missing, 'links to files that do not exist:\n' + '\n'.join(missing)


@pytest.mark.skipif(importlib.util.find_spec('mkdocs') is None,
                    reason="mkdocs is not installed: pip install '.[docs]'")
def test_mkdocs_build_is_strict_clean(tmp_path):
  site = tmp_path / 'site'
  result = subprocess.run(
      [sys.executable, '-m', 'mkdocs', 'build', '--strict', '--config-file',
       os.path.join(ROOT, 'mkdocs.yml'), '--site-dir', str(site)],
      cwd=ROOT, capture_output=True, text=True, timeout=300,
      env=dict(os.environ, NO_MKDOCS_2_WARNING='1'), check=False)
  assert result.returncode == 0, result.stderr[-3000:]
  for page in ('index.html', 'configuration/index.html', 'algorithms/dqn/index.html',
               'examples/kl_ppo.py', 'examples/ddpg.py'):
    assert (site / page).is_file(), page


def test_readme_stays_short():
  # The README is for a first visit; reference material belongs in docs/.
  with open(os.path.join(ROOT, 'README.md'), encoding='utf-8') as f:
    length = len(f.read())
  assert length <= 10_000, f'README.md is {length:,} characters; move detail to docs/'


def test_one_gpu_install_line():
  """Every page and config header that says how to install JAX for a GPU says it the same way."""
  files = markdown_files() + [os.path.join(ROOT, 'configs', name)
                              for name in os.listdir(os.path.join(ROOT, 'configs'))
                              if name.endswith('.gin')]
  line, mentions = "pip install -U 'jax[cuda12]'", 0
  for path in files:
    with open(path, encoding='utf-8') as f:
      text = f.read()
    assert text.count('jax[cuda') == text.count(line), path
    mentions += text.count(line)
  assert mentions >= 5
