"""`torchrun` with its imports frozen as the trainer's are (eks_ddp.trainer.startup): the `torchrun` script's own
`torch.distributed.run.main`, with the same arguments, in the same interpreter; only torch's import costs the agent
less (CPU-seconds, user+sys, of `torchrun --standalone --nproc-per-node 1 noop.py`: 2.3-2.7 -> 1.7-1.9)."""

import sys

from eks_ddp.trainer.startup import frozen_imports

with frozen_imports():
    from torch.distributed.run import main

if __name__ == "__main__":
    sys.exit(main())
