"""A third-party env-host adapter as docs/env-host.md describes one (loaded by file path), used by
tests/test_env_host.py to drive rollbench's real env host and near side in this interpreter.

Not a double of rollbench: a tiny benchmark of its own. State: ``float64 (2,)`` position, ``step`` adds the
action. Ops: ``make`` -> ok; ``step`` (array ``action``) -> obs with array ``state`` and a ``uint8 (4, 4, 3)``
image; ``drop`` forgets the state (rollbench then keeps the process for the next env, docs/env-host.md "Reuse");
``boom`` raises ValueError; ``die`` exits the process with code 7 without replying; ``hang`` sleeps for an
hour without replying.
"""

from __future__ import annotations

import os
import time
from typing import Any

import numpy as np


class Toy:
    OPS = frozenset({"make", "step", "drop", "boom", "die", "hang"})

    def __init__(self) -> None:
        self.state = np.zeros(2)

    def handle(self, op: str, msg: dict[str, Any], arrays: dict[str, np.ndarray]) -> tuple[dict[str, Any], Any]:
        if op in ("make", "drop"):
            self.state = np.zeros(2)
            return {"op": "ok"}, None
        if op == "step":
            self.state = self.state + arrays["action"]
            image = np.full((4, 4, 3), int(self.state.sum()) % 256, dtype=np.uint8)
            return {"op": "obs"}, {"state": self.state, "image": image}
        if op == "boom":
            raise ValueError("the toy benchmark raised")
        if op == "die":
            os._exit(7)
        time.sleep(3600)
        return {"op": "ok"}, None


def start(argv: list[str]) -> tuple[Toy, dict[str, Any]]:
    return Toy(), {"toy": True, "argv": argv}
