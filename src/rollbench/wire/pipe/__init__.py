"""Pipes to processes rollbench starts in other interpreters: the frame format and the child process (see
:mod:`.frames` and :mod:`.child`). Nothing here imports rollbench: host scripts import ``frames`` from this folder."""
