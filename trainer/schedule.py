"""The learning rate over a run: a linear warm-up, then a cosine decay to zero at its last step."""

import math


def warmup_cosine(total_steps: int, warmup_fraction: float):
    """LR multiplier: linear warm-up, then cosine decay to zero at the last step."""
    warmup = max(1, int(total_steps * warmup_fraction))

    def multiplier(step: int) -> float:
        if step < warmup:
            return (step + 1) / warmup
        progress = (step - warmup) / max(1, total_steps - warmup)
        return 0.5 * (1 + math.cos(math.pi * min(1.0, progress)))

    return multiplier
