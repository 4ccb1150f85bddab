"""Ray without a shared file system (issue 34): episodes per hour on a 2-node cluster against 2 local workers, the cost
of shipping one episode to the driver, and a paper estimate of a LIBERO-Plus study on 4 nodes x 8 GPUs.

``--rate``: a Ray cluster of separate processes on this machine (tests/ray_processes.py: a head without CPUs and two
1-CPU worker nodes, each in its own mount namespace where the run directory does not exist, token auth on), started
once and left running; then, interleaved over ``--repeats`` rounds, each in a fresh Python process:
``local-2`` (``--workers 2``) and ``ray-2`` (``--workers 2 --executor ray --ray-address`` the cluster: every episode
shipped to the driver). MetaWorld MT10 x ``--episodes``, ``metaworld-expert``, no video. End-to-end = episodes / wall
time of the process (imports, worker spawn or Ray connect, grading included); steady = (N - 1) / time between the
first and last episode finishing.

``--ship``: one MetaWorld reach-v3 episode of the expert (it ends at success, ~50 steps) and of ``random`` (the full
500-step horizon), each with and without ``--video``: bytes shipped, ms to pack it on the worker (write the staged files to a
private temp dir and read them back), ms for the driver to check (SHA-256, names, bound) and stage it, against ms to
stage it in place (what a shared file system costs), and ms for Ray to carry that many bytes from a worker node's
actor to the driver (median of 20, minus an empty call).

``--paper``: the estimate, from the inputs printed with it (measured here or published, each named).

Reproduce: ``MUJOCO_GL=egl .venv/bin/python benchmarks/bench_cluster.py --rate --ship --paper`` (as root: mount
namespaces).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests"))


def child(variant: str, episodes: int, out: Path, address: str | None) -> None:
    """One variant in this (fresh) process; prints its timings as JSON."""
    t0 = time.monotonic()
    from bench_parallel import run_rollbench

    r = run_rollbench("ray-2" if variant == "ray-2" else "rollbench-2", episodes, None, out, ray_address=address)
    wall = time.monotonic() - t0
    print(
        json.dumps(
            {"wall_s": wall, "n": len(r["lengths"]), "steady_s": r["ends"][-1] - r["ends"][0], "lengths": r["lengths"]}
        )
    )


def rate(episodes: int, repeats: int) -> None:
    from ray_processes import ProcessCluster

    cluster = ProcessCluster()
    try:
        cluster.connect()
        cluster.add_node(cpus=1)
        cluster.add_node(cpus=1)
        import ray

        ray.shutdown()  # the cluster stays up; each variant's process connects on its own
        rows: dict[str, list[dict[str, Any]]] = {"local-2": [], "ray-2": []}
        for _ in range(repeats):
            for variant in rows:
                out = cluster.runs / f"{variant}-{len(rows[variant])}"
                cmd = [sys.executable, __file__, "--child", variant, "--episodes", str(episodes), "--out", str(out)]
                cmd += ["--address", cluster.address]
                r = subprocess.run(cmd, env=cluster.environ(), capture_output=True, text=True, check=True)
                rows[variant].append(json.loads(r.stdout.strip().splitlines()[-1]))
        lengths = {json.dumps(rows[v][0]["lengths"]) for v in rows}
        assert len(lengths) == 1, "the variants recorded different episodes"
        print(
            f"| variant | wall s | end-to-end ep/h | steady ep/h |  (median of {repeats}, {rows['ray-2'][0]['n']} ep)"
        )
        print("|---|---:|---:|---:|")
        for variant, runs in rows.items():
            wall = statistics.median(r["wall_s"] for r in runs)
            e2e = statistics.median(r["n"] / r["wall_s"] * 3600 for r in runs)
            steady = statistics.median((r["n"] - 1) / r["steady_s"] * 3600 for r in runs)
            print(f"| {variant} | {wall:.1f} | {e2e:,.0f} | {steady:,.0f} |")
    finally:
        cluster.shutdown()


def _episode(video: bool, policy: str) -> tuple[Any, int]:
    """One MetaWorld reach-v3 episode's record (as a worker's commit step receives it) and its fps."""
    from rollbench.api import prepare_run
    from rollbench.core.spec import build_spec
    from rollbench.run.worker import EpisodeWorker, WorkerSetup

    d = Path(tempfile.mkdtemp(prefix="rb-ship-"))
    spec = build_spec(env="metaworld/reach-v3", policy=policy, episodes=1, seed=1, video=video)
    plan, log = prepare_run(spec, d)
    tasks = {t.name: t for t in plan.tasks}
    got: list[Any] = []

    class Keep:
        def commit(self, rec: Any, render_failure: str | None) -> bool:
            got.append(rec)
            return True

    worker = EpisodeWorker(
        WorkerSetup(spec, d, tasks, log["plan"]["replan_every"], log["plan"]["policy"]["needs_images"]),
        recorder=Keep(),
    )
    worker.run(plan.episodes[0])
    worker.close()
    return got[0], plan.tasks[0].fps


def _ms(fn: Any, reps: int = 5) -> float:
    times = []
    for _ in range(reps):
        t = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t) * 1000)
    return statistics.median(times)


def _costs(video: bool, policy: str) -> dict[str, Any]:
    """Bytes of one shipped episode and the ms to pack it, to check and stage it on the driver, to stage in place."""
    import shutil

    from rollbench.record.lerobot import stage_episode, video_key
    from rollbench.record.shipping import allowed_names, check_reply, pack_episode, stage_shipped

    rec, fps = _episode(video, policy)
    names = allowed_names([video_key(c) for c in rec.frames])
    shipped = pack_episode(rec, fps, None)

    def in_place() -> None:
        d = Path(tempfile.mkdtemp(prefix="rb-inplace-"))
        stage_episode(d, rec, fps)
        shutil.rmtree(d)

    def driver() -> None:
        d = Path(tempfile.mkdtemp(prefix="rb-driver-"))
        stage_shipped(d, check_reply(shipped, rec.planned.episode_index, names, 1 << 30))
        shutil.rmtree(d)

    return {
        "steps": len(rec.actions),
        "bytes": shipped.size,
        "pack_ms": _ms(lambda: pack_episode(rec, fps, None)),
        "driver_ms": _ms(driver),
        "in_place_ms": _ms(in_place),
    }


def ship() -> None:
    from ray_processes import ProcessCluster

    cases = {
        (policy, video): _costs(video, policy) for policy in ("metaworld-expert", "random") for video in (False, True)
    }
    cluster = ProcessCluster()
    try:
        ray = cluster.connect()
        cluster.add_node(cpus=1)

        @ray.remote(num_cpus=1)
        class Sender:
            def blob(self, n: int) -> bytes:
                return os.urandom(n)

        sender = Sender.remote()
        ray.get(sender.blob.remote(1))
        for case in cases.values():
            ref = [sender.blob.remote(case["bytes"]) for _ in range(3)]
            ray.get(ref)
            times, empty = [], []
            for _ in range(20):
                t = time.perf_counter()
                ray.get(sender.blob.remote(case["bytes"]))
                times.append((time.perf_counter() - t) * 1000)
                t = time.perf_counter()
                ray.get(sender.blob.remote(1))
                empty.append((time.perf_counter() - t) * 1000)
            case["ray_transfer_ms"] = statistics.median(times) - statistics.median(empty)
            case["ray_call_ms"] = statistics.median(empty)
    finally:
        if "ray" in sys.modules:
            sys.modules["ray"].shutdown()
        cluster.shutdown()
    print(
        "| episode | steps | bytes shipped | pack on worker ms | Ray carry ms | driver check+stage ms | stage in place ms |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|")
    for (policy, video), c in cases.items():
        name = f"MetaWorld reach-v3, {policy}, " + ("1 camera video" if video else "no video")
        print(
            f"| {name} | {c['steps']} | {c['bytes']:,} | {c['pack_ms']:.1f} | {c['ray_transfer_ms']:.1f} | "
            f"{c['driver_ms']:.1f} | {c['in_place_ms']:.1f} |"
        )
    print(f"(an empty Ray actor call: {statistics.median(c['ray_call_ms'] for c in cases.values()):.2f} ms)")


def paper() -> None:
    """LIBERO-Plus (10,030 episodes) on 4 nodes x 8 GPUs, one pi0.5-sized policy per GPU: ``--workers 32 --ray-gpus 1
    --batch-size B --ray-cpus 1`` (each env worker holds its GPU's policy and steps B envs in lockstep)."""
    episodes, gpus = 10_030, 32
    # LIBERO suites' horizons as openpi's LIBERO client sets them, plus its 10 settle steps; equal suite shares assumed
    horizon = statistics.mean([220, 280, 300, 520]) + 10
    replan = 5  # openpi's LIBERO example executes 5 actions of each 50-action chunk
    physics_ms = 1000 / 110  # issue 12: ~110 steps/s without rendering on this machine's core, idle
    render_cpu_ms = 1000 / 5 - physics_ms  # issue 12: ~5 steps/s with two 256x256 cameras, Mesa software EGL
    render_gpu_ms = 3.0  # ASSUMED for hardware EGL on the GPU node (not measurable here)
    reset_s = 5.4 / 3  # BENCHMARKS "LIBERO steps per second": 5.4 s at load 4.4, ~3x pessimistic by its own note
    infer = {"pi0.5 Triton, RTX 4090, 2 views (dexmal/realtime-vla)": 29.2, "stock JAX/PyTorch (>100 ms, ibid.)": 100.0}
    print(f"inputs: {episodes} episodes, {gpus} GPUs, mean horizon {horizon:.0f} steps (all episodes run to it: an")
    print(f"upper bound; 60% of it shown too), replan every {replan}, physics {physics_ms:.1f} ms/step, render")
    print(
        f"{render_cpu_ms:.0f} ms/step (CPU, measured) or {render_gpu_ms} ms/step (GPU, assumed), reset {reset_s:.1f} s"
    )
    print("| render | inference ms | batch B | steps/episode | GPU busy | wall h (full horizon) | wall h (60%) |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for render_name, render_ms in (("GPU EGL (assumed)", render_gpu_ms), ("CPU EGL (measured)", render_cpu_ms)):
        for name, lat in infer.items():
            for batch in (1, 4):
                row = []
                for frac in (1.0, 0.6):
                    steps = horizon * frac
                    sim = steps * batch * (physics_ms + render_ms)  # B envs stepped in turn on one core
                    calls = steps / replan * lat  # one batched call per chunk (latency assumed flat up to B=4)
                    per_round_s = (sim + calls) / 1000 + batch * reset_s
                    rounds = episodes / (gpus * batch)
                    row.append((rounds * per_round_s / 3600, calls / (sim + calls)))
                print(
                    f"| {render_name} | {lat:.0f} ({name.split(',')[0]}) | {batch} | {horizon:.0f} | "
                    f"{row[0][1]:.0%} | {row[0][0]:.2f} | {row[1][0]:.2f} |"
                )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rate", action="store_true")
    ap.add_argument("--ship", action="store_true")
    ap.add_argument("--paper", action="store_true")
    ap.add_argument("--episodes", type=int, default=10)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--child")
    ap.add_argument("--out", type=Path)
    ap.add_argument("--address")
    args = ap.parse_args()
    if args.child:
        child(args.child, args.episodes, args.out, args.address)
        return
    if args.rate:
        rate(args.episodes, args.repeats)
    if args.ship:
        ship()
    if args.paper:
        paper()


if __name__ == "__main__":
    main()
