"""The image tag is a hash of exactly what the build context sends, and of the platforms built.

The ECR repository's tags are immutable: a tag reused for different content fails the push.
"""

import shutil
from pathlib import Path

import pytest

from eks_ddp.workloads.image import CONTEXT, content_tag, context_files


@pytest.fixture
def context(tmp_path: Path) -> Path:
    copy = tmp_path / "trainer"
    shutil.copytree(CONTEXT, copy, ignore=shutil.ignore_patterns("__pycache__"))
    return copy


def test_the_context_is_the_trainer_its_requirements_and_dockerfile() -> None:
    files = context_files()
    assert {"Dockerfile", "requirements.txt", ".dockerignore", "cli.py", "training.py"} <= set(files)
    assert not any("__pycache__" in path or path.endswith(".pyc") for path in files)


def test_a_change_to_any_sent_file_changes_the_tag(context: Path) -> None:
    before = content_tag(["linux/arm64"], context)
    (context / "cli.py").write_text((context / "cli.py").read_text() + "\n# changed\n")
    assert content_tag(["linux/arm64"], context) != before


def test_files_the_build_does_not_send_leave_the_tag_alone(context: Path) -> None:
    before = content_tag(["linux/arm64"], context)
    (context / "__pycache__").mkdir(exist_ok=True)
    (context / "__pycache__" / "cli.cpython-311.pyc").write_bytes(b"\0bytecode")
    (context.parent / "README.md").write_text("outside the context")
    assert content_tag(["linux/arm64"], context) == before


def test_another_platform_is_another_tag(context: Path) -> None:
    """Adding an x86 group builds a multi-architecture image: pushing it under the arm64 tag would fail."""
    assert content_tag(["linux/arm64"], context) != content_tag(["linux/arm64", "linux/amd64"], context)
    assert content_tag(["linux/amd64", "linux/arm64"], context) == content_tag(["linux/arm64", "linux/amd64"], context)


def test_the_cuda_image_gets_its_own_tag(context: Path) -> None:
    """Same context and platform, another Dockerfile: an immutable tag shared by both would fail the second push."""
    assert content_tag(["linux/amd64"], context, dockerfile="Dockerfile.cuda") != content_tag(["linux/amd64"], context)
