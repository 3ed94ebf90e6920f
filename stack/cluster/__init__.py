"""What a job's controller does with failures: the restart budgets, counted as the docs promise."""
