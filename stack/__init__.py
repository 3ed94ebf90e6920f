"""The program `pulumi up` runs: the stack keys declared in Pulumi.yaml, read into typed settings, and built."""
