"""Builds the engines the local cluster runs, each from its upstream Go module at the version its folder's go.mod pins.

Each folder here is a Go module of ours: its go.mod requires the upstream module (re-declaring the `replace`
directives that make `go install` refuse it) and says why that version; its engine.toml names the main package to
build and the Go variables that make the binary report its real version. Nothing upstream is copied: the sources, and
the CRDs, charts and manifests the harness reads, stay in Go's module cache.

A binary is kept in CACHE under a key of everything that decides it (go.mod, go.sum, engine.toml, the Go version and
the build flags), so a second clone on the same machine builds nothing; a failed build leaves no binary behind.
Every step prints what it does and how long it took.

    python -m tests.cluster.engines.build [name ...]
"""

import argparse
import hashlib
import os
import subprocess
import sys
import time
import tomllib
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
CACHE = Path(os.environ.get("EKS_DDP_ENGINES", Path.home() / ".cache" / "eks-ddp" / "engines"))
# -trimpath: no local paths in the binary (the key stays machine-independent); -s -w: no symbol tables, which the
# tests never read, for a link about a third faster and a binary half the size.
BUILD_FLAGS = ("-trimpath",)
LINK_FLAGS = ("-s", "-w")


class BuildError(Exception):
    """An engine that did not build: Go missing, a module the proxy refuses, a compile error."""


@dataclass(frozen=True)
class Engine:
    name: str
    folder: Path
    package: str
    """The main package to build, "." for the folder's own."""
    version_of: str
    """The upstream module whose version the binary reports."""
    variables: dict[str, str]
    """Go string variables set at link time; {version}, {major} and {minor} are the upstream module's."""

    @classmethod
    def read(cls, folder: Path) -> "Engine":
        spec = tomllib.loads((folder / "engine.toml").read_text())
        return cls(folder.name, folder, spec["package"], spec["version_of"], spec.get("variables", {}))


def engines() -> list[Engine]:
    """Every engine folder here, by name."""
    return [Engine.read(folder) for folder in sorted(HERE.iterdir()) if (folder / "engine.toml").is_file()]


def _go(args: list[str], folder: Path) -> str:
    try:
        done = subprocess.run(["go", *args], cwd=folder, capture_output=True, text=True, env=_go_env())
    except FileNotFoundError as error:
        raise BuildError("go: not found on PATH; the local cluster's engines need Go 1.26 or later") from error
    if done.returncode:
        raise BuildError(f"go {' '.join(args)} in {folder}: {done.stderr.strip()}")
    return done.stdout.strip()


def _go_env() -> dict[str, str]:
    """The module cache may be filled by `go mod download`; go.sum then checks every download (never -mod=mod)."""
    return {**os.environ, "GOFLAGS": "-mod=readonly", "CGO_ENABLED": "0"}


def version(engine: Engine) -> str:
    """The upstream module's version as go.mod resolves it (after `replace`), e.g. v1.35.4."""
    resolved = "{{if .Replace}}{{.Replace.Version}}{{else}}{{.Version}}{{end}}"
    return _go(["list", "-m", "-f", resolved, engine.version_of], engine.folder)


def module_dir(name: str, module: str) -> Path:
    """Where Go's module cache holds `module` at the version engine `name`'s go.mod resolves: its CRDs, charts and
    manifests are read there, never copied."""
    folder = HERE / name
    _go(["mod", "download", module], folder)
    return Path(_go(["list", "-m", "-f", "{{if .Replace}}{{.Replace.Dir}}{{else}}{{.Dir}}{{end}}", module], folder))


def link_flags(engine: Engine) -> list[str]:
    full = version(engine)
    major, minor = full.lstrip("v").split(".")[:2]
    values = {"version": full, "major": major, "minor": minor}
    return [*LINK_FLAGS, *(f"-X {name}={value.format(**values)}" for name, value in engine.variables.items())]


def key(engine: Engine, go_version: str) -> str:
    digest = hashlib.sha256()
    for name in ("go.mod", "go.sum", "engine.toml", *sorted(path.name for path in engine.folder.glob("*.go"))):
        digest.update(name.encode() + b"\0" + (engine.folder / name).read_bytes())
    digest.update("\0".join((go_version, *BUILD_FLAGS, *LINK_FLAGS)).encode())
    return digest.hexdigest()[:16]


def binary(engine: Engine) -> Path:
    """Where the engine's binary is, built or not."""
    return CACHE / f"{engine.name}-{key(engine, _go(['env', 'GOVERSION'], engine.folder))}"


def build(engine: Engine) -> Path:
    """The engine's binary, built first if the cache has none for its key."""
    target = binary(engine)
    if target.exists():
        return target
    CACHE.mkdir(parents=True, exist_ok=True)
    # One partial file per process: two processes building one key at once (a test and `make deploy-local`) each
    # rename their own, and the second rename replaces the first's identical binary.
    partial = target.with_name(f"{target.name}.{os.getpid()}.partial")
    _go(["build", *BUILD_FLAGS, "-ldflags", " ".join(link_flags(engine)), "-o", str(partial), engine.package],
        engine.folder)
    partial.rename(target)
    return target


def build_all(names: list[str]) -> dict[str, Path]:
    """Each named engine (all when none), printing each step and its duration; the binaries by name."""
    known = {engine.name: engine for engine in engines()}
    unknown = sorted(set(names) - set(known))
    if unknown:
        raise BuildError(f"engine {', '.join(unknown)}: not one of {', '.join(known)} (folders of {HERE})")
    chosen = [known[name] for name in names] or list(known.values())
    built = {}
    for step, engine in enumerate(chosen, 1):
        start = time.monotonic()
        cached = binary(engine).exists()
        print(f"==> [{step}/{len(chosen)}] {engine.name}: {engine.version_of} {version(engine)}", flush=True)
        built[engine.name] = build(engine)
        took = "already built" if cached else f"built in {time.monotonic() - start:.0f} s"
        print(f"    {took}: {built[engine.name]}", flush=True)
    return built


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("names", nargs="*", help="engines to build (default: all)")
    try:
        build_all(parser.parse_args(argv).names)
    except BuildError as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
