"""batchscope's inspector: a FastAPI + Jinja2 + htmx server over the read path, and the CLI."""
