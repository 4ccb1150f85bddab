"""``rollbench release``: copying runs with secrets and private data replaced."""
