"""`make mutate`: mutmut over each target of targets.toml with only that target's tests, in a copy of the checkout (a
mutant is written into files, and an interrupted run must never leave one in yours).

The score is the usual one: killed over all mutants but the equivalent ones (a timeout is not a kill: KILLED). A
survivor is equivalent when survivors.toml names it with the reason; any other fails the run, as
does a score under --minimum over all targets or an explanation no survivor needs any more. The report goes to
runs/mutation/report.json.
"""

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import tomllib
from dataclasses import asdict, dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent
SOURCE_PATHS = ("trainer", "infra", "workloads", "stack", "tools", "engine_models", "policy", "provider")
PYTEST_ARGS = ["-p", "no:cacheprovider", "-p", "no:xdist", "-o", "addopts=", "-p", "tests.mutation.aliases"]
KILLED = {"killed"}
"""Not "timeout": a forked test that hangs proves nothing about the mutant (see FORK_SAFE), so a timeout fails the
run as a survivor does until it is looked at."""
FORK_SAFE = {"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
"""mutmut forks a test process per mutant: a thread pool the process it forks from holds (torch's OpenMP workers, gRPC's
under Pulumi's mocks) is gone in the child, which then waits for it forever (or, with gRPC's fork support on,
crashes). Its fork server (process_isolation) forks from a process that ran no test; torch's pools stay one thread."""
TRIED_AGAIN = {"survived", "timeout"}
"""Tried a second time before they count: on this 2-core machine a loaded run has let a mutant through once that
the same tests kill every other time (trainer/atomic.py's `os.fdopen(fd, "XXwbXX")`)."""
MUTANT = re.compile(r"^\s+(?P<name>[\w.]+): (?P<status>[\w ]+)$")


@dataclass
class Survivor:
    name: str
    module: str
    change: list[str]
    why: str = ""


@dataclass
class Outcome:
    target: str
    modules: list[str]
    counts: dict[str, int]
    seconds: float
    survivors: list[Survivor] = field(default_factory=list)
    killed_on_second_try: list[str] = field(default_factory=list)
    """Survivors of the first run that a second run killed: counted killed, listed to be looked at (a test that
    catches a mutant only sometimes is a weak test)."""

    @property
    def killed(self) -> int:
        return sum(n for status, n in self.counts.items() if status in KILLED)

    @property
    def unexplained(self) -> int:
        return sum(1 for mutant in self.survivors if not mutant.why)

    @property
    def score(self) -> float:
        return score(self.killed, self.unexplained)


def score(killed: int, unexplained: int) -> float:
    """Killed over the mutants a test could kill: every one but the survivors explained as equivalent."""
    return killed / max(1, killed + unexplained)


def copy_of_checkout(into: Path) -> Path:
    """The tracked and untracked-but-not-ignored files, as they are in the working tree (symlinks kept)."""
    listed = subprocess.run(
        ["git", "ls-files", "-co", "--exclude-standard", "-z"], cwd=ROOT, check=True, capture_output=True
    ).stdout
    for name in filter(None, listed.decode().split("\0")):
        source, target = ROOT / name, into / name
        if not source.is_symlink() and not source.exists():
            continue  # deleted in the working tree, not yet in git
        target.parent.mkdir(parents=True, exist_ok=True)
        if source.is_symlink():
            target.symlink_to(source.readlink())
        else:
            shutil.copy2(source, target)
    return into


def configure(copy: Path, modules: list[str], tests: list[str], pyproject: str) -> None:
    """mutmut's settings for one target, and the mutated tree's `eks_ddp` package: symlinks to the mutated copies."""
    also_copy = sorted(p.name for p in copy.iterdir() if p.name not in {*SOURCE_PATHS, "eks_ddp", "mutants", ".git"})
    settings = {
        "source_paths": list(SOURCE_PATHS),
        "only_mutate": modules,
        "also_copy": also_copy,
        "pytest_add_cli_args": PYTEST_ARGS,
        "pytest_add_cli_args_test_selection": tests,
        "process_isolation": "forkserver",
        "do_not_mutate_patterns": [r"\blog\.(debug|info|warning)\(", r"^\s*print\("],
    }
    lines = [f"{key} = {json.dumps(value)}" for key, value in settings.items()]
    (copy / "pyproject.toml").write_text(pyproject + "\n[tool.mutmut]\n" + "\n".join(lines) + "\n")
    shutil.rmtree(copy / "mutants", ignore_errors=True)
    shutil.copytree(copy / "eks_ddp", copy / "mutants" / "eks_ddp", symlinks=True)


def mutmut(copy: Path, *args: str) -> str:
    command = [sys.executable, "-m", "mutmut", *args]
    run = subprocess.run(command, cwd=copy, capture_output=True, text=True, env={**os.environ, **FORK_SAFE})
    if run.returncode != 0:
        raise SystemExit(f"mutmut {' '.join(args)} failed in {copy}:\n{run.stdout[-3000:]}{run.stderr[-3000:]}")
    return run.stdout


def survivor(copy: Path, name: str) -> Survivor:
    """The survivor's module and its change: the diff's removed and added lines, stripped (how survivors.toml
    names it, so the explanation holds while the lines do)."""
    diff = mutmut(copy, "show", name).splitlines()
    module = next(line.removeprefix("--- ").removeprefix("a/") for line in diff if line.startswith("--- "))
    change = [line[0] + line[1:].strip() for line in diff if line[:1] in "-+" and line[:3] not in ("---", "+++")]
    return Survivor(name, module.removeprefix("mutants/"), change)


def run_target(copy: Path, name: str, target: dict, pyproject: str, children: int) -> Outcome:
    started = time.monotonic()
    configure(copy, target["modules"], target["tests"], pyproject)
    mutmut(copy, "run", "--max-children", str(children))
    statuses = _statuses(copy)
    again = sorted(name for name, status in statuses.items() if status in TRIED_AGAIN)
    if again:
        mutmut(copy, "run", "--max-children", str(children), *again)
        statuses = _statuses(copy)
    counts: dict[str, int] = {}
    for status in statuses.values():
        counts[status] = counts.get(status, 0) + 1
    survived = [survivor(copy, n) for n, status in sorted(statuses.items()) if status not in KILLED]
    killed_again = [n for n in again if statuses[n] in KILLED]
    return Outcome(name, target["modules"], counts, round(time.monotonic() - started, 1), survived, killed_again)


def _statuses(copy: Path) -> dict[str, str]:
    listed = mutmut(copy, "results", "--all", "true").splitlines()
    return {match["name"]: match["status"] for match in map(MUTANT.match, listed) if match}


def explain(outcomes: list[Outcome], explained: list[dict]) -> list[str]:
    """Fills each survivor's reason from survivors.toml; returns the problems: survivors without one, and reasons
    no survivor needs any more."""
    used: set[int] = set()
    problems = []
    for outcome in outcomes:
        for mutant in outcome.survivors:
            index = next(
                (i for i, e in enumerate(explained) if e["module"] == mutant.module and e["change"] == mutant.change),
                None,
            )
            if index is None:
                problems.append(f"{mutant.module}: {mutant.name} survived, unexplained: {' | '.join(mutant.change)}")
            else:
                used.add(index)
                mutant.why = explained[index]["why"]
    ran = {module for outcome in outcomes for module in outcome.modules}
    problems += [
        f"survivors.toml: {e['module']}: {' | '.join(e['change'])}: no such survivor any more (killed, or the line "
        "changed): remove it"
        for i, e in enumerate(explained)
        if i not in used and e["module"] in ran
    ]
    return problems


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="make mutate", description=(__doc__ or "").splitlines()[0])
    targets = tomllib.loads((HERE / "targets.toml").read_text())
    parser.add_argument("targets", nargs="*", choices=[[], *targets], help="targets to run (default: all)")
    parser.add_argument("--minimum", type=float, default=0.95, help="lowest kill rate a target may have (0.95)")
    parser.add_argument("--children", type=int, default=2, help="mutants tested at once (2)")
    parser.add_argument("--report", type=Path, default=ROOT / "runs" / "mutation" / "report.json")
    args = parser.parse_args(argv)
    explained = tomllib.loads((HERE / "survivors.toml").read_text()).get("survivor", [])
    pyproject = (ROOT / "pyproject.toml").read_text()
    outcomes = []
    with tempfile.TemporaryDirectory(prefix="eks-ddp-mutate-") as scratch:
        copy = copy_of_checkout(Path(scratch))
        for name in args.targets or list(targets):
            outcomes.append(run_target(copy, name, targets[name], pyproject, args.children))
            print(f"{name}: {json.dumps(outcomes[-1].counts)} ({outcomes[-1].seconds:.0f} s)", flush=True)
    problems = explain(outcomes, explained)
    print(f"\n{'target':24s} {'mutants':>8s} {'killed':>7s} {'equivalent':>11s} {'score':>7s}")
    for o in outcomes:
        equivalent = sum(1 for mutant in o.survivors if mutant.why)
        print(f"{o.target:24s} {sum(o.counts.values()):8d} {o.killed:7d} {equivalent:11d} {o.score:7.1%}")
    killed = sum(o.killed for o in outcomes)
    overall = score(killed, sum(o.unexplained for o in outcomes))
    print(f"{'all':24s} {sum(sum(o.counts.values()) for o in outcomes):8d} {killed:7d} {'':11s} {overall:7.1%}")
    if overall < args.minimum:
        problems.append(f"score {overall:.1%} over these targets is under --minimum {args.minimum:.0%}")
    args.report.parent.mkdir(parents=True, exist_ok=True)
    args.report.write_text(json.dumps([{**asdict(o), "score": o.score} for o in outcomes], indent=2))
    for o in outcomes:
        if o.killed_on_second_try:
            print(f"{o.target}: killed only when tried again: {', '.join(o.killed_on_second_try)}")
    print("\n".join(problems) or f"score {overall:.1%}, at least {args.minimum:.0%}; every survivor explained")
    return 1 if problems else 0


if __name__ == "__main__":
    raise SystemExit(main())
