"""`python -m trainer ...` (and `torchrun -m trainer ...`)."""

from trainer.cli import main

raise SystemExit(main())
