"""`python -m trainer ...` (and `torchrun -m trainer ...`).

The process ends with `os._exit`, after flushing, without the interpreter's teardown: everything a
command writes is written, fsynced and closed by then (checkpoints, model, summary, run log, uploads).
Observed here (2026-11-22, torch 2.13.0 CPU, gloo, about 1 run in 6 under load): one rank of a finished
run never exited, stuck in native teardown after `train` returned (py-spy: no Python frame below the
call, gloo's worker threads waiting) while the other rank had exited, until the other pod's torchrun
gave up at its exit barrier 300 s later. The root cause is not found; skipping teardown keeps a
finished pod from holding its node. In-process callers of `trainer.cli.main` are not affected.
"""

import os
import sys

from trainer.cli import main

code = main()
sys.stdout.flush()
sys.stderr.flush()
os._exit(code)
