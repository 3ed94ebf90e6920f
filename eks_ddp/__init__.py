"""eks-ddp: distributed PyTorch training on Amazon EKS as code.

Every part lives under this one import namespace, so a program with its own `infra/` or `stack/` package can use
it. In the repository the subpackages are the top-level folders (`infra/`, `workloads/`, `trainer/`, `stack/`,
`tools/`, `engine_models/`, `policy/`, `provider/`), linked here; the wheel carries them under `eks_ddp/`.

What is stable (semantic versioning, breaking changes in CHANGELOG.md with their migration) and what is internal
is listed in docs/api.md. This module imports nothing: the trainer's image has no Pulumi, the components no torch.
"""
