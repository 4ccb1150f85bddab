"""The ``rollbench`` command line, one module per command group."""
