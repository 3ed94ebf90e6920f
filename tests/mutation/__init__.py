"""Mutation testing (`make mutate`): mutmut plants small bugs in the modules where a silent one loses data or money or
breaks a cluster, and each must fail a test of that module (targets.toml); a mutant no test can tell apart is named
with the reason in survivors.toml."""
