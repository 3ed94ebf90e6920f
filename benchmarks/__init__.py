"""Benchmarks: the trainer against a workshop-style baseline loop (run with `make bench`)."""
