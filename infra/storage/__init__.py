"""Shared volumes: FSx for Lustre, EFS, an existing FSx file system, and the claim every training pod mounts."""
