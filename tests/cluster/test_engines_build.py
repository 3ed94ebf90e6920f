"""The engines' build: it fails in one line without Go or with an unknown engine (never skips), and a binary is
rebuilt when anything that decides it changes."""

import shutil
from pathlib import Path

import pytest

from tests.cluster.engines import build


def test_without_go_the_build_fails_in_one_line(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("PATH", "/nonexistent")
    assert build.main(["kube"]) == 1
    assert capsys.readouterr().err.strip().splitlines() == [
        "error: go: not found on PATH; the local cluster's engines need Go 1.26 or later"
    ]


def test_an_unknown_engine_is_refused_with_the_known_ones(capsys: pytest.CaptureFixture[str]) -> None:
    assert build.main(["kubelet"]) == 1
    error = capsys.readouterr().err
    assert "engine kubelet: not one of" in error and "kube" in error and "kwok" in error


def test_the_cache_key_follows_go_sum_the_go_version_and_the_engine_spec(tmp_path: Path) -> None:
    folder = shutil.copytree(build.HERE / "kwok", tmp_path / "kwok")
    engine = build.Engine.read(folder)
    first = build.key(engine, "go1.26.8")
    assert build.key(engine, "go1.26.8") == first
    assert build.key(engine, "go1.26.9") != first
    (folder / "go.sum").write_text((folder / "go.sum").read_text() + "example.com/x v1.0.0 h1:AAAA=\n")
    assert build.key(engine, "go1.26.8") != first
