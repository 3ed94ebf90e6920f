"""The stack program's parts: typed config, the program itself, the offline preview, the local demo."""
