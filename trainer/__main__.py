"""`python -m eks_ddp.trainer ...` (and `torchrun -m trainer ...`)."""

from eks_ddp.trainer.cli import main

raise SystemExit(main())
