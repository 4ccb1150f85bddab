"""``--policy agent:PROVIDER/MODEL``: an LLM agent that drives the robot through tools, with a transcript per episode.

The agent talks to an OpenAI-compatible chat-completions API (:mod:`rollbench.policies.agent.client`) and acts
through the tool set of the task's env family (:mod:`rollbench.policies.agent.tools`: Cartesian move, delta move,
gripper for arm tasks; ``take_picture``, ``done``, ``give_up`` everywhere). The goal is the episode's instruction.

Endpoint and key, from the environment (never from options, never written to disk):

* base URL: policy option ``base_url``, else ``$ROLLBENCH_AGENT_BASE_URL``, else ``$<PROVIDER>_BASE_URL`` (e.g.
  ``OPENAI_BASE_URL``), else the provider's public URL for ``openai`` and ``openrouter``; else ConfigError.
* API key: ``$ROLLBENCH_AGENT_API_KEY``, else ``$<PROVIDER>_API_KEY`` (``OPENAI_API_KEY``...); none = no
  ``Authorization`` header (local servers). Only the *name* of the variable is recorded (provenance ``api_key_env``).

``PROVIDER`` is the part before the first ``/`` and ``MODEL`` the rest (``agent:openrouter/anthropic/claude-x``
sends model ``anthropic/claude-x``). Provenance records ``provider``, ``model``, ``base_url`` (user name, password
and query removed) and the options, so summaries can group runs by model.

One episode: a system message (robot, units, tools), a user message with the goal, the state and (option
``images``, default true) a camera picture; then every ``act`` sends the previous tool call's result (the state
after its actions were executed, steps used so far) and asks the model for the next tool call; the first tool call
of a reply is executed (at most 8 kept, the others answered "not executed" or dropped: :mod:`.replies`), a reply
without a tool call gets a reminder, and more than ``max_text_replies`` (default 3) in a row end the episode as
``error`` (fault ``policy``), like tool calls with unknown names or arguments that are not JSON. ``done`` ends the
episode as ``policy_stop``, ``give_up`` as ``give_up``. The horizon is the step budget (a tool call costs >= 1 step).

Transcript (``transcripts/chunk-CCC/file-FFF.jsonl``, the episode row's ``rollbench/transcript``), one JSON object
per line, ``type``:

* ``episode``: task, seed, provider, model, tool set, tools, ``started_utc``;
* ``message``: ``message`` (as sent/received; an image is replaced by ``{"type": "image_ref", "camera", "step",
  "sha256", "width", "height"}``: the frame of that step is in the episode video when recorded), ``t_s``;
* ``call``: one model call: ``turn``, ``t_s``, ``duration_s``, ``attempts`` (status, wait before, duration),
  ``usage`` (``prompt_tokens``, ``completion_tokens``, ``total_tokens``: null, not counted, when not a count; see
  ``client.usage_count``), ``cost_usd``, ``finish_reason``, ``cost_error`` when the cost or a count is bad (null
  cost), ``tool_calls_dropped``;
* ``action``: a tool call executed: ``tool``, ``arguments``, ``step`` (first env step), ``steps``, ``note``,
  ``actions`` (the chunk);
* ``end``: ``termination_reason``, ``success``, ``length``, ``error``, ``totals`` (``model_calls``,
  ``prompt_tokens``, ``completion_tokens``, ``total_tokens``, ``cost_usd``). ``rollbench grade`` sums the totals.

Request: ``model``, ``messages``, ``tools``, ``tool_choice: "auto"``, ``seed`` (the episode's seed, for providers
that honour it), and ``temperature`` / ``max_tokens`` only when given as options (some reasoning models refuse
them). Other options: ``timeout_s`` (60), ``connect_timeout_s`` (10), ``retries`` (4), ``backoff_s`` (1.0),
``max_move_steps`` (50), ``gripper_steps`` (10), ``max_text_replies`` (3), ``images`` (true), ``camera`` (default:
the first rendered), ``probe`` (true: ``GET /models`` before any episode).

Cost: ``price_per_mtok`` (``{"input": USD, "output": USD}`` per million tokens, each from 0 to 1e6) when given,
else the provider's ``usage.cost`` when it reports one, else null (with ``cost_error`` when not finite). ``wire_capture: true`` (``eval --wire-capture``) also writes every
raw HTTP exchange to ``wire/chunk-CCC/file-FFF.jsonl`` (row column ``rollbench/wire_capture``), credentials redacted.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import time
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

import numpy as np

from rollbench.core.contracts import (
    ConfigError,
    EpisodeError,
    Observation,
    PolicyGiveUp,
    PolicyInfo,
    PolicyStop,
    TaskInfo,
)
from rollbench.core.jsonfile import strict_dumps
from rollbench.policies.agent.client import ChatClient, call_usage, parse_prices, public_url
from rollbench.policies.agent.replies import MAX_CALL_CHARS, answers, kept_reply, oversized
from rollbench.policies.agent.tools import ToolSet
from rollbench.wire.decode import described
from rollbench.wire.obs_map import check_options, positive, retries

PROVIDER_URLS = {"openai": "https://api.openai.com/v1", "openrouter": "https://openrouter.ai/api/v1"}
OPTIONS: dict[str, type | tuple[type, ...]] = {
    "base_url": str,
    "timeout_s": (int, float),
    "connect_timeout_s": (int, float),
    "retries": int,
    "backoff_s": (int, float),
    "temperature": (int, float),
    "max_tokens": int,
    "max_move_steps": int,
    "gripper_steps": int,
    "max_text_replies": int,
    "images": bool,
    "camera": str,
    "wire_capture": bool,
    "price_per_mtok": dict,
    "probe": bool,
}
SYSTEM = (
    "You control a simulated robot through tools, one tool call per reply. Goal: the user's instruction. "
    "Positions are in metres in the world frame. After each tool call you get the resulting state. "
    "Call `done` when the goal is achieved, `give_up` if you cannot achieve it. Every tool call uses env steps "
    "from a fixed budget."
)


def png_bytes(img: np.ndarray) -> bytes:
    """``uint8 (H, W, 3)`` RGB -> PNG file bytes (PyAV's PNG encoder)."""
    import av

    arr = np.ascontiguousarray(img, dtype=np.uint8)
    ctx = av.CodecContext.create("png", "w")
    ctx.width, ctx.height, ctx.pix_fmt = arr.shape[1], arr.shape[0], "rgb24"
    packets = [*ctx.encode(av.VideoFrame.from_ndarray(arr, format="rgb24")), *ctx.encode(None)]
    return b"".join(bytes(p) for p in packets)


class AgentPolicy:
    """See the module docstring. ``name``: ``agent:PROVIDER/MODEL``; options: :data:`OPTIONS`."""

    def __init__(self, name: str, options: Mapping[str, Any]) -> None:
        if "api_key" in options:  # before the unknown-option check, which would refuse it less helpfully
            raise ConfigError("the API key is read from $ROLLBENCH_AGENT_API_KEY or $<PROVIDER>_API_KEY, not options")
        check_options(options, OPTIONS)
        spec = name.split(":", 1)[1] if ":" in name else ""
        provider, _, model = spec.partition("/")
        if not provider or not model:
            raise ConfigError(f"agent policy {name!r} must be agent:PROVIDER/MODEL, e.g. agent:openai/gpt-4o")
        env = provider.upper().replace("-", "_").replace(".", "_")
        base = (
            options.get("base_url")
            or os.environ.get("ROLLBENCH_AGENT_BASE_URL")
            or os.environ.get(f"{env}_BASE_URL")
            or PROVIDER_URLS.get(provider)
        )
        if not base:
            raise ConfigError(
                f"no base URL for provider {provider!r}: set ROLLBENCH_AGENT_BASE_URL or {env}_BASE_URL "
                f"(known providers: {', '.join(PROVIDER_URLS)})"
            )
        key_env = next((v for v in ("ROLLBENCH_AGENT_API_KEY", f"{env}_API_KEY") if os.environ.get(v)), None)
        self.provider, self.model = provider, model
        self.max_move_steps = int(options.get("max_move_steps", 50))
        self.gripper_steps = int(options.get("gripper_steps", 10))
        self.max_text_replies = int(options.get("max_text_replies", 3))
        tries = retries(options, 4)
        if min(self.max_move_steps, self.gripper_steps) < 1 or self.max_text_replies < 0:
            raise ConfigError("max_move_steps and gripper_steps must be >= 1; max_text_replies >= 0")
        self.temperature = options.get("temperature")  # sent only when given: reasoning models refuse it
        self.max_tokens = options.get("max_tokens")
        self.camera = options.get("camera")
        self.images = bool(options.get("images", True))
        self.prices = parse_prices(options.get("price_per_mtok"))
        self.wire_enabled = bool(options.get("wire_capture", False))
        self._wire: list[dict[str, Any]] = []
        self.client = ChatClient(
            str(base),
            os.environ.get(key_env) if key_env else None,
            timeout_s=positive(options, "timeout_s", 60.0),
            connect_timeout_s=positive(options, "connect_timeout_s", 10.0),
            retries=tries,
            backoff_s=positive(options, "backoff_s", 1.0),
            capture=self._wire.append if self.wire_enabled else None,
        )
        try:
            probed = self.client.probe(model) if options.get("probe", True) else {}
        except BaseException:
            self.client.close()
            raise
        self.info = PolicyInfo(
            name=name,
            chunk_size=self.max_move_steps,
            replan_every=self.max_move_steps,  # every tool call's chunk is executed whole
            needs_images=self.images,
            io_bound=True,  # waits on the provider: batch slots' calls overlap in threads
            provenance={
                "kind": "llm-agent",
                "provider": provider,
                "model": model,
                "base_url": public_url(str(base)),
                "api_key_env": key_env,
                "protocol": "OpenAI chat completions (tools)",
                **{k: v for k, v in options.items() if k != "base_url"},
                **probed,
            },
        )
        self._active = False

    # ---- episode ---------------------------------------------------------------------------------------------
    def reset(self, task: TaskInfo, seed: int) -> None:
        self.tools = ToolSet(task, self.max_move_steps, self.gripper_steps)
        self.seed, self.task = seed, task
        self.messages: list[dict[str, Any]] = []
        self.lines: list[dict[str, Any]] = []
        self._wire.clear()
        self.pending: dict[str, Any] | None = None
        self.steps = self.turn = 0
        self.totals: dict[str, Any] = {k: 0 for k in ("model_calls", "prompt_tokens", "completion_tokens")}
        self.totals.update(total_tokens=0, cost_usd=None)
        self.t0 = time.perf_counter()
        self._active = True
        self._line(
            "episode",
            task=task.name,
            seed=int(seed),
            provider=self.provider,
            model=self.model,
            tool_set=self.tools.kind,
            tools=self.tools.schemas(),
            started_utc=datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ"),
        )

    def _line(self, kind: str, **fields: Any) -> None:
        self.lines.append({"type": kind, "t_s": round(time.perf_counter() - self.t0, 6), **fields})

    def _add(self, message: dict[str, Any], logged: dict[str, Any] | None = None) -> None:
        self.messages.append(message)
        self._line("message", message=logged or message)

    def _picture(self, obs: Observation) -> tuple[dict[str, Any], dict[str, Any]] | None:
        """(content part as sent, as logged) for the camera image of ``obs``, or None without images."""
        if not obs.images:
            return None
        cam = self.camera if self.camera in obs.images else next(iter(obs.images))
        png = png_bytes(obs.images[cam])
        h, w = obs.images[cam].shape[:2]
        sent = {"type": "image_url", "image_url": {"url": "data:image/png;base64," + base64.b64encode(png).decode()}}
        ref = {
            "type": "image_ref",
            "camera": cam,
            "step": self.steps,
            "sha256": hashlib.sha256(png).hexdigest(),
            "width": w,
            "height": h,
        }
        return sent, ref

    def _user(self, text: str, obs: Observation | None) -> None:
        pic = self._picture(obs) if obs is not None and self.images else None
        if pic is None:
            self._add({"role": "user", "content": text})
        else:
            parts = [{"type": "text", "text": text}]
            self._add({"role": "user", "content": [*parts, pic[0]]}, {"role": "user", "content": [*parts, pic[1]]})

    def act(self, observation: Observation, instruction: str) -> np.ndarray:
        """The action chunk of the model's next motion tool call (see the module docstring).

        Raises PolicyStop (``done``), PolicyGiveUp (``give_up``), InfrastructureError (transport, timeout, retries
        exhausted), EpisodeError with fault ``policy`` (malformed tool calls, no tool call).
        """
        if not self._active:
            raise EpisodeError("agent policy: act() before reset()")
        state = np.asarray(observation.state)
        if not self.messages:
            self._add({"role": "system", "content": SYSTEM})
            self._user(f"Instruction: {instruction}\nNow: {self.tools.describe(state)}.", observation)
        elif self.pending is not None:
            p = self.pending
            text = f"{p['note']}. Now: {self.tools.describe(state)}. Env steps used: {self.steps}."
            for answer in answers(p, text):
                self._add(answer)
            if p["name"] == "take_picture":
                has = self.images and bool(observation.images)
                self._user("The picture you took:" if has else "No camera image is available in this run.", observation)
            self.pending = None
        text_replies = 0
        while True:
            calls, dropped = self._call()
            if not calls:
                text_replies += 1
                if text_replies > self.max_text_replies:
                    raise EpisodeError(f"the model replied {text_replies} times in a row without a tool call")
                self._user("Reply with exactly one tool call.", None)
                continue
            return self._execute(calls, dropped, state)

    def _execute(self, calls: list[Any], dropped: int, state: np.ndarray) -> np.ndarray:
        first = calls[0]
        if oversized(first):
            raise EpisodeError(f"malformed tool call: {described(first)}, over {MAX_CALL_CHARS} characters")
        try:
            call_id, fn = first["id"], first["function"]
            name, raw_args = fn["name"], fn.get("arguments") or "{}"
            args = json.loads(raw_args) if isinstance(raw_args, str) else raw_args
        except (KeyError, TypeError, ValueError, RecursionError) as exc:  # RecursionError: arguments nested too deep
            raise EpisodeError(f"malformed tool call ({type(exc).__name__}; the call is {described(first)})") from None
        if not isinstance(args, dict):
            raise EpisodeError(f"malformed tool call: its arguments are {described(raw_args)}, not a JSON object")
        if name not in self.tools.names():
            raise EpisodeError(f"the model called an unknown tool; tools: {', '.join(self.tools.names())}")
        if name == "done":
            self._line("action", turn=self.turn, tool=name, arguments=args, step=self.steps, steps=0)
            raise PolicyStop("the agent called done")
        if name == "give_up":
            self._line("action", turn=self.turn, tool=name, arguments=args, step=self.steps, steps=0)
            raise PolicyGiveUp(str(args.get("reason", "")))
        chunk, note = self.tools.chunk(name, args, state)
        self._line(
            "action",
            turn=self.turn,
            tool=name,
            arguments=args,
            step=self.steps,
            steps=len(chunk),
            note=note,
            actions=chunk.tolist(),
        )
        skipped = [c["id"] for c in calls[1:]]  # kept_reply keeps only other calls with a string id
        self.pending = {"id": call_id, "name": name, "note": note, "skipped": skipped, "dropped": dropped}
        self.steps += len(chunk)
        return chunk

    def _call(self) -> tuple[list[Any], int]:
        """One model call: its kept tool calls and the number dropped (:func:`.replies.kept_reply`)."""
        self.turn += 1
        body: dict[str, Any] = {
            "model": self.model,
            "messages": self.messages,
            "tools": self.tools.schemas(),
            "tool_choice": "auto",
            "seed": int(self.seed),
        }
        if self.temperature is not None:
            body["temperature"] = float(self.temperature)
        if self.max_tokens is not None:
            body["max_tokens"] = self.max_tokens
        t = time.perf_counter()
        reply, attempts = self.client.complete(body, self.turn)
        duration = time.perf_counter() - t
        try:
            choice = reply["choices"][0]
            message = choice["message"]
            assert isinstance(message, dict)
        except (KeyError, IndexError, TypeError, AssertionError):
            raise EpisodeError(f"malformed model API reply (no choices[0].message in {described(reply)})") from None
        raw_usage = reply.get("usage")
        usage: dict[str, Any] = raw_usage if isinstance(raw_usage, dict) else {}
        counts, cost, cost_error = call_usage(usage, self.prices)  # a count that is not one: null, with cost_error
        self.totals["model_calls"] += 1
        for k, n in counts.items():
            self.totals[k] += n or 0
        if cost is not None:
            self.totals["cost_usd"] = (self.totals["cost_usd"] or 0.0) + cost
        kept, calls, dropped = kept_reply(message)
        self._line(
            "call",
            turn=self.turn,
            duration_s=duration,
            attempts=attempts,
            usage=counts,
            cost_usd=cost,
            **({"cost_error": cost_error} if cost_error else {}),  # a provider's NaN cost: null, and why
            finish_reason=choice.get("finish_reason"),
            response_model=reply.get("model"),
            tool_calls_dropped=dropped,
        )
        self._add(kept)
        return calls, dropped

    def finish_episode(self, outcome: Mapping[str, Any]) -> dict[str, bytes]:
        """The episode's transcript (and wire capture) as JSONL bytes; see the module docstring."""
        if not self._active:
            return {}
        self._active = False
        self._line(
            "end",
            **{k: outcome.get(k) for k in ("termination_reason", "success", "length", "error")},
            totals=self.totals,
        )
        out = {"transcript": _jsonl(self.lines, self.client)}
        if self.wire_enabled:
            out["wire_capture"] = _jsonl(self._wire, self.client)
        return out

    def close(self) -> None:
        self.client.close()


def _jsonl(lines: list[dict[str, Any]], client: ChatClient) -> bytes:
    """``lines`` as strict JSON Lines (NaN and infinities anywhere: null), the API key redacted in any form."""
    done = (client.recorded(json.loads(strict_dumps(line, default=str))) for line in lines)
    return "".join(client.redact(strict_dumps(line)) + "\n" for line in done).encode()


def make_agent_policy(name: str, options: Mapping[str, Any]) -> AgentPolicy:
    """An LLM agent over an OpenAI-compatible chat API: agent:PROVIDER/MODEL (tools, transcripts; docs/agents.md)."""
    try:
        import httpx  # noqa: F401  (the remote extra)
    except ImportError:
        raise ConfigError("agent policies need httpx: pip install 'rollbench[remote]'") from None
    return AgentPolicy(name, options)
