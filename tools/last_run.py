"""`make tensorboard` (`python -m eks_ddp.tools.last_run`): TensorBoard on the newest run's events under runs/.

Every run writes its events to `<output dir>/tensorboard` (trainer.outputs): `make demo` under
`runs/local/<stack>/shared/runs/<job>/<run id>/`, a plain `train` under `runs/train/`. The newest is the one whose
events changed last, so a resumed run counts from its resume, not from its first start.
"""

import argparse
import os
import shlex
import sys
from pathlib import Path

from eks_ddp.trainer.cli import tensorboard_command
from eks_ddp.trainer.outputs import TENSORBOARD_DIR


def newest_events(root: Path) -> Path | None:
    """The `tensorboard` directory under `root` holding the most recently written event file, or None."""
    newest: tuple[float, Path] | None = None
    for events in root.rglob("events.out.tfevents.*"):
        if events.parent.name == TENSORBOARD_DIR:
            written = events.stat().st_mtime
            if newest is None or written > newest[0]:
                newest = (written, events.parent)
    return newest[1] if newest else None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m eks_ddp.tools.last_run", description="TensorBoard on the newest run."
    )
    parser.add_argument("--runs", type=Path, default=Path("runs"), help="where to look (default runs/)")
    parser.add_argument("--port", type=int, default=6006, help="TensorBoard's port on 127.0.0.1 (default 6006)")
    args = parser.parse_args(argv)
    events = newest_events(args.runs)
    if events is None:
        print(f"error: --runs {args.runs}: no TensorBoard events under it; run `make demo` first", file=sys.stderr)
        return 2
    address = ["--host", "127.0.0.1", "--port", str(args.port)]
    command = [*shlex.split(tensorboard_command()), "--logdir", str(events), *address]
    print(f"$ {' '.join(command)}", flush=True)
    os.execv(command[0], command)


if __name__ == "__main__":
    sys.exit(main())
