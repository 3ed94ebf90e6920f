"""The README stays a short front door into docs/, its links land on files and headings that exist, every page is
in the site's nav, and nothing a user reads names a path outside the repository (such as ../shared); the built site
renders whole offline: nothing loaded from another host, its diagram drawn by its own mermaid, its lists and tables
as written."""

import importlib.util
import re
import subprocess
import sys
import tarfile
from html.parser import HTMLParser
from pathlib import Path
from types import ModuleType
from typing import Any

import markdown
import pytest
import yaml
from mkdocs.exceptions import PluginError

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
DOCS = ROOT / "docs"
MAX_README_LINES = 250
OUTSIDE = "../shared"
# Tracked files a user reads or runs, by suffix (tests/ is the suite's own business).
USER_SUFFIXES = {".py", ".yaml", ".yml", ".tsv", ".txt", ".md"}

FENCE = re.compile(r"^(```|~~~).*?^\1", re.DOTALL | re.MULTILINE)
CODE_SPAN = re.compile(r"`[^`\n]*`")
LINK = re.compile(r"\]\(([^)\s]+)\)")


def link_targets(text: str) -> list[str]:
    """Markdown link targets outside code: `](path)` inside a code span or block is not a link."""
    return LINK.findall(CODE_SPAN.sub("", FENCE.sub("", text)))


def heading_ids(page: Path) -> set[str]:
    """The ids MkDocs gives a page's headings: those of Python-Markdown's toc extension, which MkDocs runs."""
    html = markdown.markdown(page.read_text(), extensions=["toc", "fenced_code", "tables"])
    return set(re.findall(r'<h[1-6] id="([^"]+)"', html))


def broken_links(page: Path, text: str) -> list[str]:
    """Relative links of `text` (written in `page`) whose file, or whose anchor's heading, does not exist."""
    broken: list[str] = []
    for target in link_targets(text):
        if re.match(r"[a-z][a-z0-9+.-]*:", target):  # https:, mailto: ... point elsewhere by design
            continue
        path, _, anchor = target.partition("#")
        file = (page.parent / path).resolve() if path else page
        if not file.exists() or not file.is_relative_to(ROOT):
            broken.append(f"{target}: no such file in the repository")
        elif anchor and file.suffix == ".md" and anchor not in heading_ids(file):
            broken.append(f"{target}: {file.name} has no heading with the id {anchor!r}")
    return broken


def nav_pages(nav: Any) -> list[str]:
    """Every page a MkDocs nav names, at any depth (entries are `title: page` or `title: [entries]`)."""
    if isinstance(nav, str):
        return [nav]
    if isinstance(nav, list):
        return [page for entry in nav for page in nav_pages(entry)]
    if isinstance(nav, dict):
        return [page for value in nav.values() for page in nav_pages(value)]
    raise AssertionError(f"unexpected nav entry {nav!r}")


class _MkDocsLoader(yaml.SafeLoader):
    """mkdocs.yml names Python objects (`!!python/name:...`), which a safe loader refuses; read them as text."""


_MkDocsLoader.add_multi_constructor(
    "tag:yaml.org,2002:python/name:", lambda _loader, suffix, _node: f"python/name:{suffix}"
)


def test_readme_is_a_front_door() -> None:
    lines = len(README.read_text().splitlines())
    assert lines <= MAX_README_LINES, (
        f"README.md has {lines} lines; move detail into docs/ (at most {MAX_README_LINES})"
    )


def test_link_check_reports_missing_files_and_anchors() -> None:
    """The link checker must itself see a broken link, or a passing README check proves nothing."""
    text = "[a](docs/deploy.md#no-such-heading) [b](docs/nowhere.md) [c](docs/deploy.md#destroy) `[d](x.md)`"
    assert broken_links(README, text) == [
        "docs/deploy.md#no-such-heading: deploy.md has no heading with the id 'no-such-heading'",
        "docs/nowhere.md: no such file in the repository",
    ]


def test_readme_links_land_on_files_and_headings_that_exist() -> None:
    assert link_targets(README.read_text()), "README.md links nowhere"
    assert broken_links(README, README.read_text()) == []


def test_readme_links_to_every_docs_page() -> None:
    """The README is the way in: each task's page is one link away (index.md is the site's copy of the front door)."""
    linked = {(README.parent / target.partition("#")[0]).resolve() for target in link_targets(README.read_text())}
    unlinked = [page.name for page in sorted(DOCS.glob("*.md")) if page.name != "index.md" and page not in linked]
    assert unlinked == []


def test_every_docs_page_is_in_the_nav_and_every_nav_entry_exists() -> None:
    config = yaml.load((ROOT / "mkdocs.yml").read_text(), Loader=_MkDocsLoader)
    assert config["docs_dir"] == "docs"
    in_nav = nav_pages(config["nav"])
    assert len(in_nav) == len(set(in_nav)), "a page is in the nav twice"
    pages = {page.relative_to(DOCS).as_posix() for page in DOCS.rglob("*.md")}
    assert sorted(set(in_nav) - pages) == [], "nav entries without a page"
    assert sorted(pages - set(in_nav)) == [], "pages missing from the nav"


def _user_facing_files() -> list[Path]:
    tracked = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    files = {ROOT / "README.md", ROOT / "CHANGELOG.md", *(p for p in DOCS.rglob("*") if p.is_file())}
    files |= {
        ROOT / name
        for name in tracked.splitlines()
        if not name.startswith("tests/") and Path(name).suffix in USER_SUFFIXES and (ROOT / name).is_file()
    }
    return sorted(files)


def test_no_user_facing_file_points_outside_the_repository() -> None:
    """A user's clone has no ../shared: the schemas and reference tables ship in upstream/."""
    files = _user_facing_files()
    assert README in files and DOCS / "deploy.md" in files and ROOT / "infra" / "facts" / "versions.py" in files
    mentions = [
        f"{path.relative_to(ROOT)}:{number}: {line.strip()}"
        for path in files
        for number, line in enumerate(path.read_bytes().decode(errors="replace").splitlines(), 1)
        if OUTSIDE in line
    ]
    assert mentions == []


# The built site (`make docs`), as a reader's browser loads it: from this site alone, with no other host to reach.
LOADING_ATTRIBUTES = {"src", "srcset", "poster", "data"}
"""Attributes whose URL a browser fetches to show a page, on any element (<a href> is followed, not loaded)."""
LOADING_HREFS = {"link", "image", "use"}
"""Elements whose href is fetched: style sheets, icons, preconnects and the like; SVG images and uses."""
EXTERNAL = re.compile(r"^\s*(https?:)?//", re.IGNORECASE)
CSS_LOADS = re.compile(r"""(@import\s+(url\(\s*)?|url\(\s*)["']?(?P<url>(https?:)?//[^"')\s]+)""", re.IGNORECASE)
JS_URLS = re.compile(r"""["'`](?P<url>https?://[^"'`\s]+)""")
JS_URLS_NOT_LOADED = {
    "http://www.w3.org/": "XML namespace names (SVG, XHTML, XLink, MathML): identifiers, never fetched",
    "https://unpkg.com/mermaid@11/": "mkdocs-material 9.8.2 loads it only where no mermaid is loaded yet; every page "
    "with a diagram loads the site's own copy first (test_every_diagram_is_drawn_by_a_script_in_the_site)",
    "https://unpkg.com/resize-observer-polyfill": "mkdocs-material loads it only in a browser without ResizeObserver, "
    "which every browser it supports has",
    "https://api.github.com/": "mkdocs-material reads a repository's facts only when mkdocs.yml sets repo_url",
    "https://${": "the same for a GitLab repo_url",
}


class _Loads(HTMLParser):
    """What a page makes the browser fetch: URLs in loading attributes and <link>/SVG hrefs, and the style sheets'
    own loads in <style> elements and style attributes."""

    def __init__(self) -> None:
        super().__init__()
        self.urls: list[str] = []
        self._in_style = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        for name, value in attrs:
            if value is None:
                continue
            if name in LOADING_ATTRIBUTES or (name in {"href", "xlink:href"} and tag in LOADING_HREFS):
                self.urls += [part.split()[0] for part in value.split(",") if part.strip()]
            elif name == "style":
                self.urls += [match["url"] for match in CSS_LOADS.finditer(value)]
        self._in_style = tag == "style"

    def handle_endtag(self, tag: str) -> None:
        self._in_style = False

    def handle_data(self, data: str) -> None:
        if self._in_style:
            self.urls += [match["url"] for match in CSS_LOADS.finditer(data)]


def external_loads(site: Path) -> list[str]:
    """Every URL of another host the built site would load when viewed, as `file: url`."""
    found: list[str] = []
    for path in sorted(site.rglob("*")):
        relative = path.relative_to(site)
        if path.suffix == ".html":
            parser = _Loads()
            parser.feed(path.read_text())
            found += [f"{relative}: {url}" for url in parser.urls if EXTERNAL.match(url)]
        elif path.suffix == ".css":
            found += [f"{relative}: {match['url']}" for match in CSS_LOADS.finditer(path.read_text())]
        elif path.suffix == ".js":
            urls = {match["url"] for match in JS_URLS.finditer(path.read_text(errors="replace"))}
            found += [f"{relative}: {url}" for url in sorted(urls) if not url.startswith(tuple(JS_URLS_NOT_LOADED))]
    return found


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The site as `make docs` builds it (strict: a broken link or anchor fails the build)."""
    directory = tmp_path_factory.mktemp("site")
    build = [sys.executable, "-m", "mkdocs", "build", "--strict", "--quiet", "--site-dir", str(directory)]
    done = subprocess.run(build, cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    return directory


def test_the_load_scan_sees_every_kind_of_load(tmp_path: Path) -> None:
    """The scan must itself see a load of another host, or a clean site proves nothing."""
    (tmp_path / "page.html").write_text(
        '<link rel="stylesheet" href="https://fonts.example/a.css"><a href="https://example.com/">a link</a>'
        '<img src="//cdn.example/i.png"><style>@import "https://x.example/s.css";</style><script src="local.js">'
        '</script><div style="background: url(http://y.example/b.png)"></div>'
    )
    (tmp_path / "s.css").write_text("@font-face{src:url(https://fonts.example/f.woff2)}")
    (tmp_path / "s.js").write_text('x("http://www.w3.org/2000/svg");_t("https://cdn.example/m.min.js")')
    assert external_loads(tmp_path) == [
        "page.html: https://fonts.example/a.css",
        "page.html: //cdn.example/i.png",
        "page.html: https://x.example/s.css",
        "page.html: http://y.example/b.png",
        "s.css: https://fonts.example/f.woff2",
        "s.js: https://cdn.example/m.min.js",
    ]


def test_the_site_loads_nothing_from_another_host(site: Path) -> None:
    """Viewed offline (or behind a firewall), every page is whole: no web fonts, scripts or styles from elsewhere."""
    config = yaml.load((ROOT / "mkdocs.yml").read_text(), Loader=_MkDocsLoader)
    assert "repo_url" not in config  # the condition under which JS_URLS_NOT_LOADED's repository URLs stay unused
    assert external_loads(site) == []


def test_every_diagram_is_drawn_by_a_script_in_the_site(site: Path) -> None:
    """A page with a diagram loads mermaid from this site before mkdocs-material's bundle looks for it (else the
    bundle fetches it from a CDN, and offline the reader sees the diagram's source)."""
    pages = [page for page in sorted(site.rglob("*.html")) if 'class="mermaid"' in page.read_text()]
    assert pages, "no page of the site has a diagram"
    for page in pages:
        scripts = re.findall(r'<script src="([^"]+)"', page.read_text())
        bundle = next(index for index, src in enumerate(scripts) if "/bundle." in f"/{src}")
        mermaid = [src for src in scripts[:bundle] if re.search(r"(^|/)mermaid[^/]*\.min\.js$", src)]
        assert mermaid, f"{page.relative_to(site)} loads no mermaid of its own before {scripts[bundle]}"
        assert (page.parent / mermaid[0]).resolve().is_file(), f"{page.relative_to(site)}: {mermaid[0]} not in the site"


def test_no_list_item_is_swallowed_by_the_paragraph_before_it(site: Path) -> None:
    """Python-Markdown, unlike GitHub, reads a `- item` right after a paragraph's last line as more of that paragraph;
    the watch page lost its `cloudwatch` item so."""
    swallowed = [
        f"{page.relative_to(site)}: {line.strip()[:80]}"
        for page in sorted(site.rglob("*.html"))
        for paragraph in re.findall(r"<p>(.*?)</p>", page.read_text(), re.DOTALL)
        for line in paragraph.splitlines()[1:]
        if re.match(r"\s*([-*+]|\d+\.)\s", line)
    ]
    assert swallowed == []
    watch = (site / "watch" / "index.html").read_text()
    assert re.search(r"<li>\s*(<p>)?<strong><code>cloudwatch</code></strong>", watch)


def test_code_in_a_table_cell_breaks_between_words_only(site: Path) -> None:
    """mkdocs-material lets code break anywhere (`word-break: break-word`), so a narrow first column split component
    names mid-word; the site's own style sheet, linked from every page, restores normal breaking for table code."""
    pages = sorted(site.rglob("*.html"))
    sheets = {href for page in pages for href in re.findall(r'<link rel="stylesheet" href="([^"]+)"', page.read_text())}
    own = [site / sheet.lstrip("./") for sheet in sheets if "assets/stylesheets/main." not in sheet]
    own = [sheet for sheet in own if sheet.is_file()]
    rules = " ".join(sheet.read_text() for sheet in own)
    assert re.search(r"table[^{}]*\bcode\b[^{}]*\{[^}]*word-break:\s*normal", rules), own
    assert all(any(sheet.name in page.read_text() for sheet in own) for page in pages)


def _mermaid_hook() -> ModuleType:
    """docs/hooks/offline_mermaid.py, which MkDocs loads by path (it is no package's module)."""
    spec = importlib.util.spec_from_file_location("offline_mermaid", DOCS / "hooks" / "offline_mermaid.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_a_mermaid_tarball_that_is_not_the_pinned_one_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What the registry serves must be byte for byte the tarball whose integrity is pinned, or the build stops."""
    hook = _mermaid_hook()

    def npm_pack(args: list[str], **_: Any) -> subprocess.CompletedProcess[str]:
        script = tmp_path / "mermaid.min.js"
        script.write_text("globalThis.mermaid = {};")
        tarball = Path(args[args.index("--pack-destination") + 1]) / f"mermaid-{hook.MERMAID_VERSION}.tgz"
        with tarfile.open(tarball, "w:gz") as archive:
            archive.add(script, hook.MERMAID_IN_PACKAGE)
        return subprocess.CompletedProcess(args, 0, "", "")

    monkeypatch.setattr(hook, "npm", npm_pack)
    destination = tmp_path / "site-copy.min.js"
    refused = f"the registry's tarball is sha512-.*, not {re.escape(hook.MERMAID_INTEGRITY)}"
    with pytest.raises(PluginError, match=refused):
        hook.fetch_mermaid(destination)
    assert not destination.exists()
