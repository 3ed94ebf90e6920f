"""The package version follows the changelog: its newest release is the version in pyproject.toml."""

import re
import tomllib

from tests.conftest import ROOT


def test_the_newest_changelog_release_is_the_package_version() -> None:
    releases = re.findall(r"^## \[(\d+\.\d+\.\d+)\] - \d{4}-\d{2}-\d{2}$", (ROOT / "CHANGELOG.md").read_text(), re.M)
    version = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    assert releases and releases[0] == version, (releases, version)
    assert releases == sorted(releases, key=lambda v: tuple(map(int, v.split("."))), reverse=True)


def test_every_section_has_a_link_reference() -> None:
    text = (ROOT / "CHANGELOG.md").read_text()
    sections = re.findall(r"^## \[([^\]]+)\]", text, re.M)
    references = re.findall(r"^\[([^\]]+)\]: \S+$", text, re.M)
    assert sections[0] == "Unreleased" and references == sections
