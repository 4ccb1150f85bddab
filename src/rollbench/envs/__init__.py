"""Env families, one module each; registered under the ``rollbench.envs`` entry point group."""
