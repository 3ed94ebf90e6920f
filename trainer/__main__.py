"""`python -m eks_ddp.trainer ...` (and `torchrun -m trainer ...`)."""

from eks_ddp.trainer.startup import frozen_imports

with frozen_imports():  # torch's import, a second sooner on every rank
    from eks_ddp.trainer.cli import main

raise SystemExit(main())
