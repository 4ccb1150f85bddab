"""EvalSpec: what to evaluate. Every field here can change results, so the spec is the run's identity.

How to execute (worker count, executor, output directory) is deliberately *not* in the spec: running the same
spec with 1 or 3 workers must record the same episodes.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Sequence
from typing import Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SerializerFunctionWrapHandler,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_serializer,
    model_validator,
)

from rollbench.core.bounds import MAX_IMAGE_SIDE, MAX_REPLAN_EVERY, MIN_IMAGE_SIDE, image_side_ok
from rollbench.core.contracts import ConfigError, TaskInfo
from rollbench.core.format import described, did_you_mean, error_location, error_message
from rollbench.core.urlcreds import check_spec_urls

MAX_ACTION_NOISE = 1e6  # action units; far above every task's range, far below float overflow
MAX_EPISODES_PER_TASK = 100_000
MAX_BATCH_SIZE = 256  # episodes (and simulators) one worker keeps in lockstep (rollbench.run.execution)
MAX_WORKERS = 1024  # worker processes or Ray actors of one run (hostile8 F7: 99999999999 was accepted)
DEFAULT_POLICY_TIMEOUT_S = 300.0  # generous: a VLA's first call (compilation, warm-up) can take a minute
# fields added after run directories existed: left out of the identity hash at their default, so those runs resume
LATER_FIELDS: dict[str, object] = {
    "first_trial": 0,
    "policy_timeout_s": DEFAULT_POLICY_TIMEOUT_S,
    "success_hold": 1,
    "fast_render": False,
    "instructions": None,
    "instruction_perturb": None,
    "latency": "none",
    "stale": "skip",
    "trial_order_seed": None,
}
# image_size None (the tasks' own) came later too; old runs stored an explicit size, so their identity is unchanged
MAX_VARIANTS = 64
MAX_INSTRUCTION_CHARS = 4096  # a paragraph: benchmarks' instructions are a sentence (LIBERO's longest ~100 characters)
VARIANT_NAME = r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$"


class InstructionVariant(BaseModel):
    """One instruction of a sweep: a short name (recorded per episode as ``rollbench/variant``) and the exact text."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str = Field(pattern=VARIANT_NAME)
    instruction: str = Field(min_length=1, max_length=MAX_INSTRUCTION_CHARS)

    @field_validator("instruction")
    @classmethod
    def _text(cls, v: str) -> str:
        if not v.strip():
            raise ValueError("an instruction variant must not be blank")
        return v


class EvalSpec(BaseModel):
    """A policy × tasks × episodes evaluation.

    Attributes:
        env: a task (``metaworld/pick-place-v3``), a suite (``metaworld/MT10``) or a comma-separated list.
        policy: a registered policy name (``rollbench policies``) or a server URL (``ws://host:port``).
        episodes: episodes per task (each independently reset); >= 1.
        max_steps: horizon override in env steps; None = each task's own horizon.
        seed: base seed; trial k of every task runs with seed ``seed + k`` (and stored initial state k).
        first_trial: the first trial of each task to run: the run holds trials ``first_trial .. first_trial +
            episodes - 1`` of the plan with ``--seed seed``, each with the seed and initial state it has in the full
            plan, so trial k is reproduced alone by ``--seed seed --first-trial k --episodes 1``.
        action_noise: std of Gaussian noise added to every action (action units), 0 = none; at most
            :data:`MAX_ACTION_NOISE`, and at most 10 times the widest action range of the planned tasks
            (``check_action_noise``): beyond it every action is clipped to a bound, which evaluates nothing.
        replan_every: actions executed from each chunk before asking the policy again, 1 to 1,000,000 (the
            longest horizon); None = the policy's advertised value, else 1.
        video: record one mp4 per camera per episode.
        cameras: cameras to render (for the policy and the video); None = the task's first camera.
        image_size: ``(height, width)`` in pixels of rendered images; None = the tasks' own (``TaskInfo.image_size``:
            224 x 224, LIBERO 256 x 256 as its reference client renders).
        success_rule: override of the tasks' declared success rule (a warning is recorded in the run log).
        instruction: override of the tasks' instruction given to the policy (recorded; at most
            :data:`MAX_INSTRUCTION_CHARS` characters, as is each sweep variant's); None = the task's own.
        policy_options: extra options passed to the policy factory (e.g. observation key mapping).
        policy_timeout_s: deadline in seconds of every policy call (``reset`` and ``act``, in-process too); a call
            past it ends its episode as ``error`` (see :mod:`rollbench.run.deadline`).
        success_hold: success must hold for this many consecutive steps to count (1 = the first success step);
            for benchmarks whose goal predicates fire while an object is still in the air.
        fast_render: reflections and shadows off (LIBERO); changes what a policy sees, so off unless asked for.
        instructions: an instruction sweep: every task runs every variant on the same seeds and initial states
            (paired); None = one instruction per task. Excludes ``instruction`` and ``instruction_perturb``.
        instruction_perturb: a perturbation sweep: variant ``original`` (the task's instruction, or ``instruction``)
            plus one variant per named perturbation (:data:`rollbench.core.perturb.PERTURBATIONS`), generated
            deterministically from each task's instruction.
        latency: simulated duration of every policy call, during which the env keeps stepping (``none``,
            ``fixed:MS``, ``steps:K``, ``measured``; :mod:`rollbench.core.latency`).
        stale: what happens to the actions of a delayed chunk planned for steps already executed: ``skip`` them
            (as real-time execution does) or ``execute`` them late (:mod:`rollbench.run.schedule`).
        trial_order_seed: None = trials in order (trial k is the j = k - first_trial-th episode); else each task's
            trials are drawn by a permutation seeded with it (:func:`rollbench.core.plan.trial_order`), so that any
            prefix of the plan is a random sample of the task's trials (``rollbench sequential`` sets it). Left out
            of run.json's spec when None, so a fixed-N run's run.json and identity are what they were.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    env: str = Field(min_length=1)
    policy: str = Field(min_length=1)
    episodes: int = Field(ge=1, le=MAX_EPISODES_PER_TASK)
    max_steps: int | None = Field(default=None, ge=1, le=1_000_000)
    seed: int = Field(default=0, ge=0, le=2**31 - 1)
    action_noise: float = Field(default=0.0, ge=0.0, le=MAX_ACTION_NOISE, allow_inf_nan=False)
    replan_every: int | None = Field(default=None, ge=1, le=MAX_REPLAN_EVERY)
    video: bool = False
    cameras: tuple[str, ...] | None = None
    image_size: tuple[int, int] | None = None
    success_rule: Literal["any_step", "final_step"] | None = None
    instruction: str | None = Field(default=None, max_length=MAX_INSTRUCTION_CHARS)
    policy_options: dict[str, Any] = Field(default_factory=dict)
    first_trial: int = Field(default=0, ge=0, le=MAX_EPISODES_PER_TASK)
    policy_timeout_s: float = Field(default=DEFAULT_POLICY_TIMEOUT_S, gt=0.0, le=86_400.0, allow_inf_nan=False)
    success_hold: int = Field(default=1, ge=1, le=10_000)
    fast_render: bool = False
    instructions: tuple[InstructionVariant, ...] | None = Field(default=None, min_length=1, max_length=MAX_VARIANTS)
    instruction_perturb: tuple[str, ...] | None = Field(default=None, min_length=1)
    latency: str = "none"
    stale: Literal["skip", "execute"] = "skip"
    trial_order_seed: int | None = Field(default=None, ge=0, le=2**31 - 1)

    @model_serializer(mode="wrap")
    def _without_unset_order(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        out: dict[str, Any] = handler(self)
        if out.get("trial_order_seed", 0) is None:
            del out["trial_order_seed"]  # fixed-N runs: run.json's spec as before the field existed
        return out

    @field_validator("latency")
    @classmethod
    def _latency_mode(cls, v: str) -> str:
        from rollbench.core.latency import canonical_latency

        return canonical_latency(v)

    @field_validator("stale")
    @classmethod
    def _stale_needs_latency(cls, v: str, info: ValidationInfo) -> str:
        if v != "skip" and info.data.get("latency", "none") == "none":
            raise ValueError("stale applies only to a run with a latency (--latency fixed:MS, steps:K or measured)")
        return v

    @field_validator("image_size")
    @classmethod
    def _even_positive(cls, v: tuple[int, int] | None) -> tuple[int, int] | None:
        if v is not None and not all(image_side_ok(d) for d in v):
            raise ValueError(
                f"image size must be two even numbers of pixels between {MIN_IMAGE_SIDE} and {MAX_IMAGE_SIDE}"
            )
        return v

    @field_validator("policy_options")
    @classmethod
    def _plain_json(cls, v: dict[str, Any]) -> dict[str, Any]:
        why = _not_plain_json(v, "policy_options", 0)
        if why:
            raise ValueError(why)
        return v

    @field_validator("instruction")
    @classmethod
    def _not_blank(cls, v: str | None) -> str | None:
        if v is not None and not v.strip():
            raise ValueError("an instruction override must not be empty")
        return v

    @field_validator("instructions")
    @classmethod
    def _unique_names(cls, v: tuple[InstructionVariant, ...] | None) -> tuple[InstructionVariant, ...] | None:
        names = [x.name for x in v or ()]
        dup = sorted({n for n in names if names.count(n) > 1})
        if dup:
            raise ValueError(f"instruction variant names must be unique; repeated: {', '.join(dup)}")
        return v

    @field_validator("cameras")
    @classmethod
    def _unique_cameras(cls, v: tuple[str, ...] | None) -> tuple[str, ...] | None:
        if v is not None and len(set(v)) != len(v):
            from collections import Counter

            dup = sorted(c for c, n in Counter(v).items() if n > 1)
            raise ValueError(f"each camera once; repeated: {', '.join(dup[:5])}")
        return v

    @field_validator("instruction_perturb")
    @classmethod
    def _known_perturbations(cls, v: tuple[str, ...] | None) -> tuple[str, ...] | None:
        from rollbench.core.perturb import PERTURBATIONS

        for p in v or ():
            if p not in PERTURBATIONS:
                raise ValueError(f"unknown perturbation {p!r}; valid perturbations: {', '.join(PERTURBATIONS)}")
        if v and len(set(v)) != len(v):
            raise ValueError("each perturbation may be named once")
        return v

    @model_validator(mode="after")
    def _one_source_of_instructions(self) -> EvalSpec:
        if self.instructions is not None and (self.instruction is not None or self.instruction_perturb is not None):
            raise ValueError("an instruction sweep (instructions) excludes instruction and instruction_perturb")
        return self

    def identity(self) -> str:
        """A stable hash of every field; two runs with equal identity must record the same episodes.

        Fields of :data:`LATER_FIELDS` at their default are left out, so runs recorded before they existed keep
        their identity (and resume)."""
        return spec_identity_of(self.model_dump(mode="json"))


def spec_identity_of(fields: dict[str, Any]) -> str:
    """:meth:`EvalSpec.identity` of a spec as run.json records it (``model_dump(mode="json")``): 16 hex digits of
    the sha256 of its canonical JSON, :data:`LATER_FIELDS` at their default left out. ``rollbench release`` uses it
    on a spec it redacted, so the released identity is a hash of released values only."""
    fields = {k: v for k, v in fields.items() if not (k in LATER_FIELDS and v == LATER_FIELDS[k])}
    blob = json.dumps(fields, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


MAX_OPTIONS_DEPTH = 32  # nesting of policy_options (an obs_map is 3 deep)


def _not_plain_json(value: Any, where: str, depth: int) -> str | None:
    """Why ``value`` would not be written to run.json as it is (so a resume would not rebuild the same spec): a
    NaN or infinite number (JSON has none; it would be written as ``null`` or ``NaN``), a complex number, bytes, a
    non-string key, another type, or nesting deeper than :data:`MAX_OPTIONS_DEPTH`; None when it is plain JSON."""
    if depth > MAX_OPTIONS_DEPTH:
        return f"{where} is nested more than {MAX_OPTIONS_DEPTH} levels deep"
    if value is None or isinstance(value, bool | int | str):
        return None
    if isinstance(value, float):
        return None if math.isfinite(value) else f"{where} is {value}, not a finite number"
    if isinstance(value, list | tuple):
        return next((w for i, x in enumerate(value) if (w := _not_plain_json(x, f"{where}[{i}]", depth + 1))), None)
    if isinstance(value, dict):
        for k, x in value.items():
            if not isinstance(k, str):
                return f"{where} has a key {k!r} that is not a string"
            if w := _not_plain_json(x, f"{where}.{k}", depth + 1):
                return w
        return None
    return f"{where} is a {type(value).__name__}, not a JSON value"


def build_spec(**fields: Any) -> EvalSpec:
    """Build an EvalSpec, turning pydantic's validation errors into one ConfigError with plain sentences; a policy
    URL carrying credentials (in the name or the options) is a ConfigError too (:func:`check_spec_urls`)."""
    try:
        spec = EvalSpec(**fields)
        check_spec_urls(spec.policy, spec.policy_options)
        return spec
    except ValidationError as exc:
        parts = []
        for err in exc.errors():
            where = error_location(err["loc"], "spec")
            got = described(err.get("input"))  # a long value is named by its type and size, never its content
            hint = ""
            if err["type"] == "extra_forbidden" and len(err["loc"]) == 1:  # a misspelt field: name the close ones
                hint = did_you_mean(str(err["loc"][0]), list(EvalSpec.model_fields))
            msg = error_message(err)
            parts.append(f"{where}: {msg}" + ("" if got in msg else f" (got {got})") + hint)
        raise ConfigError("invalid evaluation spec: " + "; ".join(parts)) from None


def what_it_loads(spec: EvalSpec) -> list[tuple[str, str]]:
    """The names in ``spec`` that make rollbench import code, run an interpreter, read a path, connect somewhere or
    spend a credential, as ``(field, value)``: every policy name with a ``:`` (a ``package.module:factory`` imports
    the module, a ``lerobot:PATH_OR_REPO`` reads a checkpoint or downloads a Hub repo, a ``ws://``/``wss://``/
    ``http://``/``https://`` URL connects there with ``$ROLLBENCH_SERVER_TOKEN``, an ``agent:PROVIDER/MODEL`` calls
    the provider with the user's API key), a ``python`` interpreter in the policy options (runs it), a ``base_url``
    in the policy options (an agent policy sends the user's API key there), any string with a ``:`` anywhere in the
    policy options, nested ones included (a wrapper's ``inner`` policy name, see :func:`_option_targets`), a task whose family says the name gives
    code to import or an interpreter to run (``EnvFamily.names_code``: ``gym:MODULE:ID``, ``hostedgym:PYTHON:ID``).
    A run directory someone handed over may name any of them in its run.json: resuming it loads them only when the
    user names the same values again (issue 30, item 14; issue 42, item 1). Registered plain names (``zero``,
    ``scripted-expert``) never have a ``:``."""
    from rollbench.core.registry import family_of

    found = []
    if ":" in spec.policy:
        found.append(("policy", spec.policy))
    found += [("policy_options", named) for named in _option_targets(spec.policy_options, "")]
    for name in (n.strip() for n in spec.env.split(",")):
        try:
            gives_code = family_of(name).names_code(name)
        except ConfigError:  # a family not installed here loads nothing (the run cannot resume anyway)
            continue
        if gives_code:
            found.append(("env", name))
    return found


def what_it_waits(spec: EvalSpec) -> list[tuple[str, str]]:
    """The deadlines and waits in ``spec`` a handed-over run would hold the user to, as ``(field, "key=value")``:
    ``policy_timeout_s`` when over :data:`DEFAULT_POLICY_TIMEOUT_S` (the deadline of every policy call, which bounds
    every wait inside one), and every policy option that names a wait (:data:`WAIT_KEYS`, :data:`WAIT_WORDS`; nested
    ones included), whatever its value. Resuming a run (``eval --resume``, ``eval --spec RUN/run.json``) honours them only when the user types
    them again or gives ``--trust-run`` (hostile round 13, F10); each is also bounded where it is parsed, typed or
    recorded alike (policy options: :data:`rollbench.wire.obs_map.MAX_WAIT_S`, ``latency_ms`` at most 60,000)."""
    found = []
    if spec.policy_timeout_s > DEFAULT_POLICY_TIMEOUT_S:
        found.append(("policy_timeout_s", f"policy_timeout_s={spec.policy_timeout_s:g}"))
    return found + [("policy_options", t) for t in _wait_targets(spec.policy_options, "")]


WAIT_KEYS = ("timeout_s", "connect_timeout_s", "start_timeout_s", "latency_ms", "retries", "backoff_s")
"""Policy options that set a deadline, a sleep or a number of retries (remote, agent, lerobot, ``gpu-standin``);
a plug-in's option is one too when its name ends in ``_s``/``_ms`` or holds one of :data:`WAIT_WORDS`."""
WAIT_WORDS = ("timeout", "sleep", "delay", "wait", "retr", "backoff", "latency")


def _is_wait(key: str) -> bool:
    low = key.lower()
    return low in WAIT_KEYS or low.endswith(("_s", "_ms")) or any(w in low for w in WAIT_WORDS)


def _wait_targets(value: Any, key: str) -> list[str]:
    """``key=value`` for every :data:`WAIT_KEYS` option in policy options ``value`` (recursively)."""
    if isinstance(value, dict):
        return [t for k, v in value.items() for t in _wait_targets(v, f"{key}.{k}" if key else str(k))]
    if isinstance(value, list | tuple):
        return [t for i, v in enumerate(value) for t in _wait_targets(v, f"{key}[{i}]")]
    return [f"{key}={value}"] if _is_wait(key.rpartition(".")[2].partition("[")[0]) else []


LOADING_KEYS = ("python", "base_url")
"""Policy options whose value is an interpreter to run or an address to send the user's API key to, whatever it is."""
DEVICE_KEYS = ("device",)
"""Policy options whose value is a torch device (``cuda:0``): a ``:`` there names no policy."""


def _option_targets(value: Any, key: str) -> list[str]:
    """``key=value`` for every value in policy options (``value``, recursively through nested objects and lists)
    that can make rollbench load or contact something: a :data:`LOADING_KEYS` entry, or any string with a ``:``,
    the form of every policy name that imports, reads or connects (``ws://``/``http://`` URLs, ``agent:``,
    ``lerobot:``, ``hostedgym:``, ``package.module:factory``): a wrapper policy (``gpu-standin``'s ``inner``) builds
    the policy its option names (issue 42, class 1)."""
    if isinstance(value, dict):
        return [t for k, v in value.items() for t in _option_targets(v, f"{key}.{k}" if key else str(k))]
    if isinstance(value, list | tuple):
        return [t for i, v in enumerate(value) for t in _option_targets(v, f"{key}[{i}]")]
    leaf = key.rpartition(".")[2].partition("[")[0]
    if leaf in LOADING_KEYS or (isinstance(value, str) and ":" in value and leaf not in DEVICE_KEYS):
        return [f"{key}={value}"]
    return []


def check_action_noise(noise: float, tasks: Sequence[TaskInfo]) -> None:
    """ConfigError when ``noise`` (``--action-noise``) is over 10 times the widest action range of ``tasks``: each
    noisy action would be clipped to a bound (issue 30, item 12)."""
    import numpy as np

    for t in tasks:
        width = float(np.max(np.asarray(t.action_high, dtype=np.float64) - np.asarray(t.action_low, dtype=np.float64)))
        if np.isfinite(width) and noise > 10 * width:
            raise ConfigError(
                f"--action-noise {noise:g} is over 10 times the action range of {t.name} (width {width:g}): every "
                "action would be clipped to a bound; give a standard deviation in action units"
            )
