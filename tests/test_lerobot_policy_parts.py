"""``--policy lerobot:CHECKPOINT`` without lerobot: the pipe frames, the feature check and the refusals that happen
before any host runs. (The host itself, against lerobot's own evaluation loop: tests/compat/test_lerobot_policy.py,
in the LeRobot venv.)"""

from __future__ import annotations

import json
import os
import struct

import numpy as np
import pytest

import rollbench.wire.pipe.frames as frames
from conftest import run_cli
from rollbench.core.contracts import EpisodeError, Observation
from rollbench.core.registry import resolve_tasks
from rollbench.policies.lerobot.observe import FAMILIES, for_host, mismatches, size_warnings
from rollbench.policies.lerobot.policy import parse_name


def roundtrip(frame: bytes) -> tuple[dict, dict]:
    r, w = os.pipe()
    try:
        os.write(w, frame)
        os.close(w)
        w = -1
        return frames.FrameReader(r).read(timeout_s=5)
    finally:
        os.close(r)
        if w >= 0:
            os.close(w)


def test_frames_carry_message_and_arrays_exactly() -> None:
    img = np.arange(96 * 96 * 3, dtype=np.uint8).reshape(96, 96, 3)
    pos = np.array([1.5, -2.25], dtype=np.float64)
    big_endian = np.array([3, 4], dtype=">i4")
    msg, arrays = roundtrip(
        frames.encode({"op": "act", "items": [{"slot": 0}]}, {"0/pixels": img, "0/a": pos, "b": big_endian})
    )
    assert msg == {"op": "act", "items": [{"slot": 0}]}
    assert arrays["0/pixels"].dtype == np.uint8 and arrays["0/pixels"].tobytes() == img.tobytes()
    assert arrays["0/a"].dtype == np.float64 and arrays["0/a"].tolist() == [1.5, -2.25]
    assert arrays["b"].dtype == np.dtype("<i4") and arrays["b"].tolist() == [3, 4]


def frame_with(header: dict, payload: bytes = b"") -> bytes:
    raw = json.dumps(header).encode()
    return b"RBLR" + struct.pack(">I", len(raw)) + raw + payload


@pytest.mark.parametrize(
    ("frame", "error"),
    [
        (b"XXXX\x00\x00\x00\x02{}", "bad magic"),
        (b"RBLR" + struct.pack(">I", frames.MAX_HEADER + 1), "exceeds"),
        (
            frame_with({"op": "x", "arrays": [["a", "|O", [1]]]}, b"\x00" * 8),
            "^frame header: array entry 0 has a dtype not in",
        ),
        (frame_with({"op": "x", "arrays": [["a", "i4,O", [1]]]}), "^frame header: array entry 0 has a dtype not in"),
        (
            frame_with({"op": "x", "arrays": [["a", "<f4", [-1]]]}),
            "^frame header: array entry 0 has a shape that is not 8",
        ),
        (
            frame_with({"op": "x", "arrays": [["<f4", [1]], ["b", "<f4", [1 << 25]]]}),
            "^frame header: array entry 0 is not",
        ),
        (frame_with({"op": "x", "arrays": [["a", "<f4", [1]], ["b", "<f4", [1 << 25]]]}), "entry 1 has a shape"),
        (b"RBLR" + struct.pack(">I", 3) + b'"\xff"', "^frame header is not UTF-8$"),
        (b"RBLR" + struct.pack(">I", 12) + b'{"a": NaN}  ', "NaN is not allowed"),
        (b"RBLR" + struct.pack(">I", 2) + b"[]", "not a JSON object"),
        (
            b"RBLR" + struct.pack(">I", 10_000) + b"[" * 5_000 + b"]" * 5_000,  # within a pipe's 64 KiB buffer
            r"^frame header nests maps and lists more than 32 deep$",
        ),
    ],
)
def test_malformed_frames_are_refused_before_any_array_is_built(frame: bytes, error: str) -> None:
    with pytest.raises(frames.FrameError, match=error):
        roundtrip(frame)


def test_a_frame_cut_short_is_a_peer_gone() -> None:
    whole = frames.encode({"op": "ok"}, {"a": np.zeros(10, dtype=np.float32)})
    with pytest.raises(frames.PeerGone):
        roundtrip(whole[:-5])


def test_object_arrays_cannot_be_sent() -> None:
    with pytest.raises(frames.FrameError, match="cannot be sent"):
        frames.encode({"op": "x"}, {"a": np.array([object()])})


def test_names_parse_into_checkpoint_and_revision() -> None:
    assert parse_name("lerobot:lerobot/diffusion_pusht") == ("lerobot/diffusion_pusht", None)
    assert parse_name("lerobot:lerobot/pi05_libero@3f2a") == ("lerobot/pi05_libero", "3f2a")
    assert parse_name("lerobot:/ckpt/pretrained_model") == ("/ckpt/pretrained_model", None)


def test_checkpoint_features_are_checked_against_the_task() -> None:
    (task,) = resolve_tasks("pusht/PushT-v0")
    libero_ckpt = {
        "input_features": {
            "observation.images.image": {"type": "VISUAL", "shape": [3, 256, 256]},
            "observation.state": {"type": "STATE", "shape": [8]},
        },
        "output_features": {"action": {"type": "ACTION", "shape": [7]}},
    }
    assert mismatches(libero_ckpt, "pusht", FAMILIES["pusht"], (96, 96), task) == [
        "input feature observation.images.image [3, 256, 256] is not provided by pusht/PushT-v0 (it provides "
        "['observation.image', 'observation.state'])",
        "input feature observation.state: checkpoint shape [8], pusht/PushT-v0 gives [2]",
        "output feature action: checkpoint shape [7], pusht/PushT-v0 takes [2]",
    ]
    fits = {
        "input_features": {"observation.image": {"type": "VISUAL", "shape": [3, 96, 96]}},
        "output_features": {"action": {"type": "ACTION", "shape": [2]}},
    }
    assert mismatches(fits, "pusht", FAMILIES["pusht"], (96, 96), task) == []
    assert mismatches(fits, "pusht", FAMILIES["pusht"], (224, 224), task) == [
        "lerobot-eval renders pusht images at 96x96, this run at 224x224 (drop --image-size or give 96x96)",
        "input feature observation.image: checkpoint shape [3, 96, 96], pusht/PushT-v0 gives [3, 224, 224]",
    ]


def test_pusht_observation_is_gym_pushts_pixels_and_agent_position() -> None:
    img = np.full((96, 96, 3), 7, dtype=np.uint8)
    native = np.array([101.25, 202.5, 300.0, 310.0, 1.0], dtype=np.float64)
    arrays, task = FAMILIES["pusht"].build(
        Observation(state=native.astype(np.float32), images={"top": img}, raw=native), "ignored"
    )
    assert task == ""  # gym-pusht's env has no task_description or task: add_envs_task gives ""
    assert arrays["pixels"] is img
    assert arrays["agent_pos"].dtype == np.float64 and arrays["agent_pos"].tolist() == [101.25, 202.5]
    with pytest.raises(EpisodeError, match=r"lerobot-eval gives uint8 \[96, 96, 3\]"):
        FAMILIES["pusht"].build(
            Observation(state=native.astype(np.float32), images={"top": np.zeros((224, 224, 3), np.uint8)}), ""
        )


def test_libero_images_go_back_to_robosuites_orientation() -> None:
    agent = np.arange(256 * 256 * 3, dtype=np.uint32).astype(np.uint8).reshape(256, 256, 3)
    wrist = agent[::-1].copy()
    raw = {
        "robot0_eef_pos": np.array([0.1, 0.2, 0.3]),
        "robot0_eef_quat": np.array([0.0, 0.0, 0.0, 1.0]),
        "robot0_gripper_qpos": np.array([0.04, -0.04]),
        "robot0_gripper_qvel": np.zeros(2),
        "robot0_joint_pos": np.arange(7.0),
        "robot0_joint_vel": np.zeros(7),
    }
    obs = Observation(state=np.zeros(8, np.float32), images={"agentview": agent, "robot0_eye_in_hand": wrist}, raw=raw)
    arrays, task = FAMILIES["libero"].build(obs, "put the bowl on the plate")
    assert task == "put the bowl on the plate"
    assert np.array_equal(arrays["pixels/image"][::-1, ::-1], agent)  # rollbench's cameras are rotated 180 degrees
    assert np.array_equal(arrays["pixels/image2"][::-1, ::-1], wrist)
    assert arrays["robot_state/eef/quat"].tolist() == [0.0, 0.0, 0.0, 1.0]
    assert arrays["robot_state/joints/pos"].tolist() == list(range(7))
    with pytest.raises(EpisodeError, match="not through serve-policy"):
        FAMILIES["libero"].build(Observation(state=np.zeros(8, np.float32), images=obs.images, raw=np.zeros(8)), "")


def test_no_lerobot_interpreter_is_exit_2_with_one_line(tmp_path) -> None:
    out = tmp_path / "run"
    opts = json.dumps({"python": str(tmp_path / "no-such-python")})
    r = run_cli(
        "eval", "--env", "pusht/PushT-v0", "--policy", f"lerobot:{tmp_path}", "--policy-options", opts, "--out", out
    )
    assert r.returncode == 2
    assert f"lerobot policy: python {tmp_path / 'no-such-python'} does not exist" in " ".join(r.stderr.split())
    assert "Traceback" not in r.stderr and not out.exists()


def test_empty_checkpoint_is_exit_2(tmp_path) -> None:
    r = run_cli("eval", "--env", "pusht/PushT-v0", "--policy", "lerobot:", "--out", tmp_path / "run")
    assert r.returncode == 2
    assert "give a checkpoint" in r.stderr


@pytest.mark.slow
def test_a_host_that_dies_at_start_is_exit_2_quoting_its_output(tmp_path) -> None:
    fake = tmp_path / "python"
    fake.write_text("#!/bin/sh\necho 'ImportError: no module named lerobot' >&2\nexit 1\n")
    fake.chmod(0o755)
    opts = json.dumps({"python": str(fake)})
    r = run_cli("eval", "--env", "pusht/PushT-v0", "--policy", f"lerobot:{tmp_path}", "--policy-options", opts)
    assert r.returncode == 2
    said = " ".join(r.stderr.split())
    assert "lerobot policy host did not start" in said and "ImportError: no module named lerobot" in said


def _libero_checkpoint(size: int) -> dict:
    image = {"type": "VISUAL", "shape": [3, size, size]}
    return {
        "input_features": {
            "observation.images.image": image,
            "observation.images.image2": image,
            "observation.state": {"type": "STATE", "shape": [8]},
        },
        "output_features": {"action": {"type": "ACTION", "shape": [7]}},
        "versions": {"lerobot": "0.6.1"},
    }


def test_libero_renders_at_the_size_the_hosts_lerobot_eval_renders() -> None:
    """lerobot 0.6.1's LiberoEnv config passes observation_height/width = 360 to the env (the host reports it as
    lerobot_eval_image_sizes); 0.4.4's passes none, so its LiberoEnv's own 256 x 256 applies."""
    (task,) = resolve_tasks("libero/libero_spatial/0")
    on_044, on_061 = for_host({}), for_host({"libero": [360, 360]})
    assert on_044["libero"].image_size == (256, 256) and not on_044["libero"].resizable
    assert on_061["libero"].image_size == (360, 360) and on_061["libero"].resizable
    assert on_061["pusht"] == FAMILIES["pusht"]
    ckpt = _libero_checkpoint(256)
    assert mismatches(ckpt, "libero", on_044["libero"], (256, 256), task) == []
    assert mismatches(ckpt, "libero", on_044["libero"], (360, 360), task) == [
        "lerobot-eval renders libero images at 256x256, this run at 360x360 (drop --image-size or give 256x256)",
        "input feature observation.images.image: checkpoint shape [3, 256, 256], libero/libero_spatial/0 gives "
        "[3, 360, 360]",
        "input feature observation.images.image2: checkpoint shape [3, 256, 256], libero/libero_spatial/0 gives "
        "[3, 360, 360]",
    ]
    # 0.6.1's lerobot-eval feeds any --env.observation_height/width to the checkpoint (it checks names only)
    assert mismatches(ckpt, "libero", on_061["libero"], (360, 360), task) == []
    assert mismatches(ckpt, "libero", on_061["libero"], (256, 256), task) == []
    agent = np.zeros((360, 360, 3), np.uint8)
    raw = {k: np.zeros(n) for k, n in (("robot0_eef_pos", 3), ("robot0_eef_quat", 4), ("robot0_gripper_qpos", 2))}
    raw |= {"robot0_gripper_qvel": np.zeros(2), "robot0_joint_pos": np.zeros(7), "robot0_joint_vel": np.zeros(7)}
    obs = Observation(state=np.zeros(8, np.float32), images={"agentview": agent, "robot0_eye_in_hand": agent}, raw=raw)
    assert on_061["libero"].build(obs, "")[0]["pixels/image"].shape == (360, 360, 3)
    with pytest.raises(EpisodeError, match=r"lerobot-eval gives uint8 \[256, 256, 3\]"):
        on_044["libero"].build(obs, "")


def test_a_checkpoint_trained_at_another_size_than_lerobot_evals_is_warned_about() -> None:
    on_061 = for_host({"libero": [360, 360]})
    assert size_warnings(_libero_checkpoint(360), on_061) == []
    assert size_warnings(_libero_checkpoint(256), for_host({})) == []
    assert size_warnings(_libero_checkpoint(256), on_061) == [
        "lerobot-eval 0.6.1 renders libero images at 360x360 by default (its env config; --env.observation_height/"
        "--env.observation_width) and feeds them to this checkpoint, whose images are 256x256: without --image-size "
        "this run renders 360x360, as lerobot-eval does; --image-size 256x256 renders the checkpoint's size "
        "(lerobot-eval: --env.observation_height=256 --env.observation_width=256)"
    ]
