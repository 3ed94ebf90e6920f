"""Everything imports the packages through eks_ddp, as a user's program does.

From the checkout a bare `import infra` still works (the folders sit at the top level), and would load a second
copy of each module beside eks_ddp's; installed, it fails or, worse, finds the user's own `infra/`.
"""

import ast
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = {"infra", "workloads", "trainer", "stack", "tools", "engine_models", "policy", "provider"}
USERS_PROJECT = "examples/own_program/"  # a user's project: its `infra` is its own package


def _bare_imports(source: Path) -> list[str]:
    found = []
    for node in ast.walk(ast.parse(source.read_text(), str(source))):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [node.module]
        else:
            continue
        found += [f"{source.relative_to(ROOT)}:{node.lineno} {name}" for name in names if name.split(".")[0] in PACKAGES]
    return found


def test_no_module_imports_a_package_outside_the_namespace() -> None:
    tracked = subprocess.run(["git", "ls-files", "*.py"], cwd=ROOT, capture_output=True, text=True, check=True)
    names = [name for name in tracked.stdout.split() if not name.startswith(USERS_PROJECT)]
    sources = [ROOT / name for name in names if not (ROOT / name).is_symlink()]
    assert len(sources) > 150
    assert [found for source in sources for found in _bare_imports(source)] == []


def test_every_package_is_linked_into_the_namespace() -> None:
    for package in PACKAGES:
        link = ROOT / "eks_ddp" / package
        assert link.is_symlink() and link.resolve() == ROOT / package, package
