"""``python -m rollbench`` runs the ``rollbench`` command line."""

from rollbench.cli.entry import main

if __name__ == "__main__":
    main()
