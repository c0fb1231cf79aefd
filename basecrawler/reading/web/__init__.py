"""The web view's Datasette plugins, templates and static files, and its limits (limits.py)."""
