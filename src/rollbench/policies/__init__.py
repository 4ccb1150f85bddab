"""Built-in policies. Factories are registered under the ``rollbench.policies`` entry point group."""
