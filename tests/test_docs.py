"""The README stays a short front door into docs/, its links land on files and headings that exist, every page is
in the site's nav, and nothing a user reads names a path outside the repository (such as ../shared)."""

import re
import subprocess
from pathlib import Path
from typing import Any

import markdown
import yaml

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
