"""Under torchrun: train a tiny model many times in one process, through the real `train` and its teardown.

Each run joins a new gloo group through its own key prefix in torchrun's store (`env://` would
reuse the previous group's stale addresses); nothing else differs from `python -m eks_ddp.trainer train`,
whose imports are frozen as here (without that, each run's `gc.collect` in `distributed.stop` examined all
of torch's objects again: a quarter of this test's CPU time).
"""

import functools
import os
import sys
import tempfile

from eks_ddp.trainer.startup import frozen_imports

with frozen_imports():
    import torch.distributed as dist

    from eks_ddp.trainer import distributed
    from eks_ddp.trainer.cli import main

RUN = ["train", "--dataset", "synthetic", "--synthetic-shape", "1x8x8", "--synthetic-size", "64", "--model", "mlp"]


def run(times: int) -> None:
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    # documented as torch.distributed.TCPStore/PrefixStore, re-exported without __all__ (hence the ignores)
    store = dist.TCPStore(  # pyright: ignore[reportPrivateImportUsage]
        os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"]), world, is_master=False
    )
    init = dist.init_process_group
    for attempt in range(times):
        prefixed = dist.PrefixStore(f"teardown-{attempt}", store)  # pyright: ignore[reportPrivateImportUsage]
        distributed.dist.init_process_group = functools.partial(init, store=prefixed, rank=rank, world_size=world)
        with tempfile.TemporaryDirectory() as output:
            code = main([*RUN, "--epochs", "1", "--batch-size", "16", "--output-dir", output])
        if code != 0:
            raise SystemExit(f"run {attempt} exited with {code}")
        print(f"run {attempt} done", flush=True)


if __name__ == "__main__":
    run(int(sys.argv[1]))
