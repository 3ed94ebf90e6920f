"""Programs that run inside the job's own image with its Python's standard library only (`python -c`)."""
