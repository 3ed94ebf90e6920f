"""The stack program's parts (typed config, the program) and the offline tools: the mocks and offline runner, the
preview, the deploy rehearsal, the local run."""
