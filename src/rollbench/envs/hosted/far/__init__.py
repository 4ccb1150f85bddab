"""Code that runs in a benchmark's own venv (never imports rollbench): the env host and its adapters."""
