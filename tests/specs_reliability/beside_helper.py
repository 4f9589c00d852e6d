"""A helper module that import_beside.py imports from its own folder."""
LIMIT = 3
