"""Every code block of the README and docs/ runs as written, in the order a reader meets it on its page.

A block titled with a file name (```python title="infra/__init__.py"```) is that file: it is written into the page's
working directory. Every other Python block runs there (a Pulumi program under the offline mocks, as the CLI would
run it; any other block as a script), and every shell command runs there through bash, `python` and `pip` being
this environment's. A page that writes files works in a directory of its own, as a reader's own project would; the
other pages' commands (`make demo`, `make preview STACK=gpu` ...) run in a copy of this repository, as in a clone.
What cannot run here is listed below, each with its reason; text, diagrams and data are shown, not run.
"""

import os
import re
import shlex
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
PAGES = [ROOT / "README.md", *sorted(DOCS.glob("*.md"))]
EXAMPLE = ROOT / "examples" / "own_program"
VENV = ROOT / ".venv"
# The environment this suite runs in (the checkout's .venv under `make test`): `python` and `pip` in the blocks.
BIN = Path(sys.executable).parent

SHELL = {"sh", "bash"}
PYTHON = {"python"}
SHOWN = {"text", "mermaid", "yaml"}
"""Output, a layout or a diagram, and data (a titled YAML block is a file the page's commands read)."""
NOT_RUN_LANGUAGES = {
    "typescript": "uses the SDK `pulumi package add` generates, which needs the Pulumi CLI (not here)",
}
NOT_RUN_COMMANDS = {
    r"make test\b": "the whole suite, which this test is part of",
    r"make cluster-(up|down)\b": "the machine's one local cluster, which tests/cluster/ runs the same deploy on "
    "meanwhile (under that contention a cluster-up failed twice, cause not yet found)",
    r"make deploy-local(-down)?\b": "the machine's one local cluster, on which tests/cluster/"
    "test_deploy_local_on_engines.py runs the same `pulumi up`, again and `pulumi destroy`",
    r"(\$\()?pulumi\b": "needs an AWS account, which is not here (the CLI itself runs in make deploy-local)",
    r"python -m venv venv\b": "the reader's own environment, which the next lines fill from a placeholder",
    r"pip install '?<clone-or-wheel>": "a placeholder; tests/test_wheel.py installs the wheel in a fresh environment",
}
COMMAND_TIMEOUT = 300
UNDER_MOCKS = "import sys; from eks_ddp.tools.mocking import run_offline; run_offline(sys.argv[1])"
"""How a Pulumi program block runs: as the CLI would run its file, under the offline mocks."""
FENCE = re.compile(r"^(?P<indent> *)(?P<fence>```+|~~~+)(?P<info>[^`\n]*)$")
TITLE = re.compile(r'\btitle="(?P<title>[^"]+)"')
COPY_IGNORED = (".venv", ".venv-checkov", "build", "*.egg-info", "runs", ".git", "__pycache__", ".pytest_cache")


@dataclass(frozen=True)
class Block:
    page: Path
    line: int
    language: str
    title: str
    """The file the block is (`title="..."`), or "" for a block to run."""
    text: str

    @property
    def where(self) -> str:
        page = self.page.relative_to(ROOT) if self.page.is_relative_to(ROOT) else self.page
        return f"{page}:{self.line}"


@dataclass
class Run:
    """One page's (or the clone's) working directory and what failed in it."""

    workdir: Path
    failures: list[str] = field(default_factory=list)
    ran: set[str] = field(default_factory=set)
    """Commands already run in this directory (without their comments): a command two pages show runs once."""


def blocks(page: Path) -> list[Block]:
    """The fenced code blocks of a Markdown page, in order, with their language and title."""
    found: list[Block] = []
    lines = page.read_text().splitlines()
    number = 0
    while number < len(lines):
        opening = FENCE.match(lines[number])
        number += 1
        if not opening:
            continue
        start, indent, fence = number, len(opening["indent"]), opening["fence"]
        while number < len(lines) and lines[number].strip() != fence:
            number += 1
        text = "\n".join(line[indent:] for line in lines[start:number]) + "\n"
        info = opening["info"].strip()
        title = TITLE.search(info)
        found.append(Block(page, start, info.split(" ")[0] if info else "", title["title"] if title else "", text))
        number += 1
    return found


def commands(text: str) -> list[str]:
    """A shell block's commands: one a line, a line ending in a backslash continued, blank lines dropped."""
    joined = re.sub(r"\\\n", " ", text)
    return [line.strip() for line in joined.splitlines() if line.strip() and not line.strip().startswith("#")]


def without_comment(command: str) -> str:
    """The command a shell runs, its trailing comment and spacing aside: two pages' `make rehearse   # ...` are one."""
    return " ".join(shlex.split(command, comments=True))


def not_run_reason(command: str) -> str | None:
    return next((reason for pattern, reason in NOT_RUN_COMMANDS.items() if re.match(pattern, command)), None)


def is_pulumi_program(text: str) -> bool:
    """A block that imports pulumi registers resources: the CLI's language host runs it, here the offline mocks."""
    return re.search(r"^(import pulumi\b|from pulumi\b)", text, re.MULTILINE) is not None


def _execute(run: Run, where: str, what: str, argv: list[str]) -> None:
    """Run `argv` in the run's directory, this environment's `python`, `pip` and `torchrun` first on the PATH; a
    failure is kept with the last line the command printed (its error, as the reader would see it)."""
    environment = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}"}
    done = subprocess.run(argv, cwd=run.workdir, env=environment, capture_output=True, text=True,
                          timeout=COMMAND_TIMEOUT)
    if done.returncode != 0:
        output = (done.stderr.strip() or done.stdout.strip() or "(no output)").splitlines()
        run.failures.append(f"{where}: {what} exited {done.returncode}: {output[-1][:300]}")


def run_block(block: Block, run: Run) -> None:
    """Write a titled block as its file; run a Python block or a shell block's commands in the working directory."""
    if block.title:
        path = run.workdir / block.title
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(block.text)
    elif block.language in PYTHON:
        script = run.workdir / f"block_{block.page.stem}_{block.line}.py"
        script.write_text(block.text)
        if is_pulumi_program(block.text):
            argv = [sys.executable, "-c", UNDER_MOCKS, str(script)]
            _execute(run, block.where, "the Pulumi program (under the offline mocks)", argv)
        else:
            _execute(run, block.where, "the Python block", [sys.executable, str(script)])
    elif block.language in SHELL:
        for command in commands(block.text):
            if not_run_reason(command) is None and without_comment(command) not in run.ran:
                run.ran.add(without_comment(command))
                _execute(run, block.where, f"`{command}`", ["bash", "-eo", "pipefail", "-c", command])
    elif block.language == "yaml":
        try:  # data shown on the page must at least parse
            yaml.safe_load(block.text)
        except yaml.YAMLError as error:
            run.failures.append(f"{block.where}: the YAML does not parse: {str(error).splitlines()[0]}")


def has_files(page: Path) -> bool:
    return any(block.title for block in blocks(page))


def clone(destination: Path) -> Path:
    """This repository as a clone has it (no .git, runs/ or build output) beside a .venv that links this one's
    contents: `make` there finds its environment set up and never installs into the shared one."""
    shutil.copytree(ROOT, destination, symlinks=True, ignore=shutil.ignore_patterns(*COPY_IGNORED))
    venv = destination / ".venv"
    venv.mkdir()
    for entry in VENV.iterdir():
        if entry.name != ".installed-eks-ddp":
            (venv / entry.name).symlink_to(entry)
    (venv / ".installed-eks-ddp").touch()  # newer than every file make checks it against
    return destination


def test_every_block_is_run_shown_or_named_here() -> None:
    """A block in a language this test neither runs nor shows would pass unseen; an entry that matches nothing
    is stale."""
    every = [block for page in PAGES for block in blocks(page)]
    languages = {block.language for block in every}
    assert "" not in languages, [block.where for block in every if not block.language]
    assert languages <= SHELL | PYTHON | SHOWN | set(NOT_RUN_LANGUAGES), languages
    shell_commands = [command for block in every if block.language in SHELL for command in commands(block.text)]
    stale = [pattern for pattern in NOT_RUN_COMMANDS if not any(re.match(pattern, c) for c in shell_commands)]
    assert stale == [] and set(NOT_RUN_LANGUAGES) <= languages


def test_a_failing_block_is_reported_with_its_page_line_and_output(tmp_path: Path) -> None:
    """The runner must itself see a failure, or a page that passes proves nothing (`pulumi up`, listed as not run
    here, is not run: it would fail)."""
    page = tmp_path / "page.md"
    page.write_text(
        "```python title=\"greeting.py\"\nprint('hi')\n```\n\n```sh\npython greeting.py\npulumi up  # not here\nls no-such-file\n```\n"
        "\n```python\nimport pulumi\nraise SystemExit('not a program')\n```\n"
    )
    run = Run(tmp_path)
    for block in blocks(page):
        run_block(block, run)
    assert [failure.split(": ", 1)[1] for failure in run.failures] == [
        "`ls no-such-file` exited 2: ls: cannot access 'no-such-file': No such file or directory",
        "the Pulumi program (under the offline mocks) exited 1: not a program",
    ]
    assert (tmp_path / "greeting.py").read_text() == "print('hi')\n"


def test_your_project_page_shows_the_example_file_for_file() -> None:
    """docs/your-project.md walks through examples/own_program/ (whose wheel install tests/test_wheel.py checks):
    its titled blocks are that directory's files, all of them, as they are."""
    shown = {block.title: block.text for block in blocks(DOCS / "your-project.md") if block.title}
    files = {
        path.relative_to(EXAMPLE).as_posix(): path.read_text()
        for path in sorted(EXAMPLE.rglob("*"))
        if path.is_file() and "__pycache__" not in path.parts
    }
    assert shown == files


@pytest.mark.parametrize("page", [page for page in PAGES if has_files(page)], ids=lambda page: page.name)
def test_a_pages_own_project_runs_as_written(page: Path, tmp_path: Path) -> None:
    """A page that shows a project's files (your-project.md) is followed in a directory of the reader's own."""
    run = Run(tmp_path / "project")
    run.workdir.mkdir()
    for block in blocks(page):
        run_block(block, run)
    assert run.failures == []


@pytest.mark.slow
def test_the_repositorys_commands_run_as_written_in_a_clone(tmp_path: Path) -> None:
    """`make demo`, `make preview STACK=gpu`, `make rehearse`, the trainer's own command line ..., every page's in
    one clone (a command two pages show runs once)."""
    run = Run(clone(tmp_path / "eks-ddp"))
    pages = [page for page in PAGES if not has_files(page)]
    for block in (block for page in pages for block in blocks(page)):
        run_block(block, run)
    assert run.ran, "no page of the repository has a command to run"
    assert run.failures == []
