"""A command's start-up without the garbage collector walking its imports over and over.

Importing torch, or the Pulumi SDKs, builds hundreds of thousands of objects that live as long as the process.
CPython 3.11 collects its young generation every 700 new container objects and all generations at every tenth of
those, so a quarter of a trainer's start-up goes to the collector examining them, and every full collection after
that examines them again. `frozen_imports` collects rarely while the imports run, then moves what they built into
the permanent generation that collections skip (`gc.freeze`, Python 3.7+) and restores the thresholds, so the work
itself collects as before. Measured on this project's 2-core VM (Python 3.11.7, torch 2.13.0; CPU seconds, user and
system, medians of 3 runs alternated with the code before): a one-epoch `train` of digits in one process 4.0 -> 3.2,
`python -m eks_ddp.tools.rehearsal --stack dev` 5.8 -> 3.5 (with stack files parsed once, by libyaml).

`reuse_freed_memory` keeps glibc from handing a training step's large buffers back to the kernel, only to fault
them in again, zeroed page by page, on the next step (see its docstring for the figures).

Standard library only: the trainer's image and the components both import it.
"""

import contextlib
import ctypes
import gc
import os
import sys
from collections.abc import Iterator

IMPORT_THRESHOLD = 50_000
"""New container objects between young collections while the imports run (CPython's default is 700)."""


def freeze_imports() -> None:
    """After a command's imports: collections skip every object that exists now."""
    gc.freeze()


@contextlib.contextmanager
def frozen_imports() -> Iterator[None]:
    """Around a command's imports: collect rarely while they run, then freeze what they built. A block that imported
    nothing new (a command run again in the same process, as tests/trainer/teardown_loop.py runs `train`) freezes
    nothing: what the previous run left for the collector stays collectable."""
    thresholds, modules = gc.get_threshold(), len(sys.modules)
    gc.set_threshold(IMPORT_THRESHOLD, *thresholds[1:])
    try:
        yield
    finally:
        gc.set_threshold(*thresholds)
        if len(sys.modules) > modules:
            freeze_imports()


M_TRIM_THRESHOLD, M_MMAP_MAX = -1, -4
"""glibc's mallopt parameters (malloc/malloc.h)."""
TRIM_THRESHOLD = 1 << 30
"""Free bytes at the top of the heap that glibc keeps before it gives them back to the kernel."""


def reuse_freed_memory() -> bool:
    """Have glibc serve every allocation from its heap and keep up to a GiB freed there: whether it applied.

    glibc maps each allocation above its mmap threshold (at most 32 MiB) on its own and unmaps it when freed, and
    returns the top of its heap to the kernel once 128 KiB lie free there. A training step allocates and frees the
    same large activations every time (33.5 MiB for the workshop CNN's second convolution at batch 128), so every step
    pays page faults and the kernel's zeroing of those pages again. Measured on this project's 2-core VM (torch 2.13.0,
    fp32 limited to AVX2): in one process, 12 steps of the workshop CNN, minor page faults 316k-607k -> 12k-20k and
    system time 0.6-1.5 s -> under 0.05 s; in 2-rank runs of 6,000 CIFAR-format images alternated with and without it
    (4 pairs), images/s 1.05-1.13x (median 1.08x), CPU seconds 0.93x, peak memory of a rank 801 -> 885 MiB.
    PyTorch's CPU tuning guide reaches the same end by preloading jemalloc or tcmalloc; this needs no extra library.

    Not applied where the C library is not glibc, or where GLIBC_TUNABLES already sets a `glibc.malloc.` tunable:
    the user's choice stands.
    """
    if not on_glibc() or "glibc.malloc." in os.environ.get("GLIBC_TUNABLES", ""):
        return False
    mallopt = ctypes.CDLL(None).mallopt
    return bool(mallopt(M_MMAP_MAX, 0)) and bool(mallopt(M_TRIM_THRESHOLD, TRIM_THRESHOLD))


def on_glibc() -> bool:
    """Whether this process runs on glibc, whose allocator `reuse_freed_memory` tunes."""
    try:
        return (os.confstr("CS_GNU_LIBC_VERSION") or "").startswith("glibc")
    except (AttributeError, ValueError, OSError):  # no such name where the C library is not glibc (macOS, musl)
        return False
