"""Far side of benchmarks/bench_env_host.py: run by .venv-libero-ref's Python, drives the env host's own LIBERO
adapter (src/rollbench/envs/hosted/far/libero_far.py) in-process, no pipe, with LIBERO's protocol as rollbench runs
it (seed, reset, init state 0, 10 settle steps, then random steps with both cameras every ``every`` steps).
Prints one JSON line: {"rates": [steps/s per repetition], "maxrss_mb": ...}.
Args: SIZE STEPS REPS EVERY."""

import json
import resource
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src" / "rollbench" / "envs" / "hosted" / "far"))
import libero_far

size, steps, reps, every = (int(a) for a in sys.argv[1:5])
both = ["agentview", "robot0_eye_in_hand"]
adapter, _ = libero_far.start(["--package", "libero.libero", "--instruction", "task"])
_, arrays = adapter.handle(
    "make", {"suite": "libero_spatial", "index": 0, "cameras": both, "image_size": [size, size]}, {}
)
rates = []
for r in range(reps):
    adapter.handle("seed", {"seed": r}, {})
    adapter.handle("reset", {"wanted": []}, {})
    adapter.handle("set_init_state", {"wanted": []}, {"state": arrays["init_states"][0]})
    for i in range(10):
        adapter.handle("step", {"wanted": both if i == 9 else []}, {"action": np.array([0.0] * 6 + [-1.0])})
    rng = np.random.default_rng(r)
    t0 = time.perf_counter()
    for i in range(steps):
        _, obs = adapter.handle("step", {"wanted": both if i % every == 0 else []}, {"action": rng.uniform(-1, 1, 7)})
        if i % every == 0:
            np.ascontiguousarray(obs["agentview_image"][::-1, ::-1])
            np.ascontiguousarray(obs["robot0_eye_in_hand_image"][::-1, ::-1])
    rates.append(round(steps / (time.perf_counter() - t0), 2))
print(json.dumps({"rates": rates, "maxrss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
