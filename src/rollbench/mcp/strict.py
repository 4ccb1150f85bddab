"""Strict tool arguments for the MCP server: no coercion, no unknown names, errors in the same words as the rest of
rollbench.

The MCP SDK validates a tool's arguments with pydantic in lax mode after "pre-parsing" strings as JSON (so
``n_episodes: "3"`` became 3, ``true`` became 1, ``video: "yes"`` became true) and ignores arguments the tool does not
have (``workers`` was dropped silently); its errors are pydantic's multi-line text with a link. :func:`make_strict`
changes that for every tool of a server: the arguments must match the published JSON schema as they are (pydantic
strict mode: an integer is a JSON integer, not a string or a boolean; a boolean is ``true``/``false``), an unknown
argument is refused, and the error is one sentence naming the argument, what it must be, what was given and the
valid argument names, returned as a tool error (``isError``) that the model can act on. Nothing runs on a refusal.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from pydantic import ValidationError

from rollbench.core import registry as report_rows
from rollbench.core.contracts import ConfigError
from rollbench.core.format import described, error_location, error_message
from rollbench.core.registry import is_import_path, resolve_remote_tasks
from rollbench.core.spec import EvalSpec, build_spec

log = logging.getLogger("rollbench.mcp")


def check_arguments(tool_name: str, model: Any, skip: set[str], arguments: Mapping[str, Any]) -> None:
    """Raise :class:`ToolError` unless ``arguments`` validate against the tool's argument ``model`` strictly
    (``skip``: parameters the SDK fills itself, such as the context)."""
    valid = [name for name in model.model_fields if name not in skip]
    unknown = sorted(set(arguments) - set(valid))
    if unknown:
        raise ToolError(
            f"{tool_name}: unknown argument {', '.join(repr(u) for u in unknown)}; valid arguments: {', '.join(valid)}"
        )
    for name, value in arguments.items():  # a lone surrogate cannot be recorded nor sent back (hostile round 12, F7)
        if not utf8_text(value):
            raise ToolError(f"{tool_name}: argument {name} is not UTF-8 text (it holds a lone surrogate)")
    try:
        model.model_validate(dict(arguments), strict=True)
    except ValidationError as exc:
        err = exc.errors(include_url=False)[0]
        where = error_location(err["loc"], "arguments")
        given = "" if err["type"] == "missing" else f", got {described(err.get('input'))}"
        raise ToolError(
            f"{tool_name}: invalid argument {where}: {error_message(err)}{given}; valid arguments: {', '.join(valid)}"
        ) from None


def utf8_text(value: Any, depth: int = 0) -> bool:
    """Whether every string in ``value`` (keys too, nested at most 32 deep) encodes as UTF-8."""
    if isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            return False
        return True
    if depth > 32:
        return True  # deeper than any tool's arguments: the model validation refuses it
    if isinstance(value, Mapping):
        return all(utf8_text(k, depth + 1) and utf8_text(v, depth + 1) for k, v in value.items())
    if isinstance(value, list | tuple):
        return all(utf8_text(v, depth + 1) for v in value)
    return True


def make_strict(server: MCPServer) -> None:
    """Make every tool of ``server`` check its arguments with :func:`check_arguments` before the SDK sees them, and
    turn off the SDK's JSON pre-parsing of string arguments (a string stays a string)."""
    for tool in server._tool_manager.list_tools():
        meta = tool.fn_metadata
        skip = {tool.context_kwarg} if tool.context_kwarg else set()
        original_run = tool.run

        async def run(
            arguments: dict[str, Any],
            context: Any,
            convert_result: bool = False,
            _tool: Any = tool,
            _run: Any = original_run,
            _skip: set[str] = skip,
        ) -> Any:
            check_arguments(_tool.name, _tool.fn_metadata.arg_model, _skip, arguments)
            return await _run(arguments, context, convert_result)

        object.__setattr__(meta, "pre_parse_json", lambda data: dict(data))
        object.__setattr__(tool, "run", run)


MAX_EPISODES = 1000
"""The most episodes per task one ``run_policy_rollout`` call may ask for (its schema's ``maximum``)."""
MAX_STEPS_CEILING = 100_000
"""The largest ``--max-steps-ceiling`` a server may be started with."""


def check_max_steps_ceiling(ceiling: int) -> None:
    """ConfigError unless ``--max-steps-ceiling`` is between 1 and :data:`MAX_STEPS_CEILING`."""
    if not 1 <= ceiling <= MAX_STEPS_CEILING:
        raise ConfigError(f"--max-steps-ceiling must be between 1 and {MAX_STEPS_CEILING}, got {ceiling}")


def outside_policy(policy: str) -> str | None:
    """What a policy name makes the server reach outside its process, or None for a registered plain name: ``"a
    LeRobot checkpoint"`` (a path to read or a Hub repo to download), ``"a policy server"`` (a URL it connects to
    with ``$ROLLBENCH_SERVER_TOKEN``), ``"an agent"`` (a provider called with the operator's API key)."""
    if policy.split(":", 1)[0] == "lerobot":
        return "a LeRobot checkpoint"
    if "://" in policy:
        return "a policy server"
    if policy.split(":", 1)[0] == "agent":
        return "an agent"
    return None


def check_allowed(policy: str, allowed: tuple[str, ...]) -> None:
    """ToolError unless ``policy`` is a plain registered name or one of ``allowed`` (the ``lerobot:``, URL and
    ``agent:`` policies the server was started with: ``--lerobot-policy``, ``--allow-policy``). A client never
    chooses a path to read, an address to connect to or a credential to spend (issue 42, item 2)."""
    if is_import_path(policy):
        valid = ", ".join(p["name"] for p in report_rows.list_policies())
        raise ToolError(
            f"policy {policy!r} looks like a Python import path; this server runs registered policies and the "
            f"servers, agents and checkpoints it was started with only. Valid policies: {valid}"
        )
    what = outside_policy(policy)
    if what is None or policy in allowed:
        return
    option = "--lerobot-policy lerobot:PATH_OR_REPO" if what == "a LeRobot checkpoint" else "--allow-policy NAME"
    kind = "LeRobot checkpoints" if what == "a LeRobot checkpoint" else "policy servers and agents"
    same = [p for p in allowed if outside_policy(p) == what]
    started = ", ".join(same) if same else f"none (start it with {option})"
    raise ToolError(
        f"policy {policy!r} is not one of the {kind} this server was started with: {started}; a client never "
        "chooses a path to read, an address to connect to or a credential to spend"
    )


@dataclass(frozen=True)
class ServerBounds:
    """What the server was started with that bounds every client's run: ``ceiling``, its ``--max-steps-ceiling``, and
    ``checkpoints``, the ``lerobot:...``, URL and ``agent:...`` policies it was started with (``--lerobot-policy``,
    ``--allow-policy``), the only ones of those a client may name (see :func:`check_allowed`)."""

    ceiling: int
    checkpoints: tuple[str, ...] = ()


def rollout_spec(
    bounds: ServerBounds,
    policy: str,
    env: str,
    n_episodes: int,
    max_steps: int,
    seed: int,
    instruction: str | None,
    video: bool,
) -> EvalSpec:
    """``run_policy_rollout``'s arguments validated as far as they can be without the simulator, within the server's
    ``bounds``; returns the EvalSpec. Raises ToolError naming the valid values."""
    ceiling = bounds.ceiling
    if not 1 <= n_episodes <= MAX_EPISODES:
        raise ToolError(
            f"n_episodes must be between 1 and {MAX_EPISODES} (got {n_episodes}): it is the number of independently "
            "reset episodes to record per task"
        )
    if not 1 <= max_steps <= ceiling:
        raise ToolError(
            f"max_steps must be between 1 and {ceiling} (this server's --max-steps-ceiling), got {max_steps}"
        )
    check_allowed(policy, bounds.checkpoints)
    try:
        resolve_remote_tasks(env)  # installed families' named tasks only: never an import (core.registry)
        return build_spec(
            env=env,
            policy=policy,
            episodes=n_episodes,
            max_steps=max_steps,
            seed=seed,
            instruction=instruction,
            video=video,
        )
    except ConfigError as exc:
        raise ToolError(f"{exc} (list_envs and list_policies give every valid name)") from None


def tool_error(exc: Exception, policies: tuple[str, ...], hint: str = "") -> ToolError:
    """The ToolError for a refused or failed run: ``exc``'s message with ``hint``, except when it names one of
    ``policies`` that reaches outside the process (a policy server, an agent's provider): then only that the
    policy could not be used, the full message going to the server's log. What a server answered (a reply's body,
    an internal service's text) never travels back to the client (issue 42, item 2)."""
    text = str(exc)
    foreign = [p for p in policies if outside_policy(p) in ("a policy server", "an agent") and p in text]
    if not foreign:
        return ToolError(f"{text}{hint}")
    log.warning("policy %s could not be used: %s", foreign[0], text)
    return ToolError(
        f"policy {foreign[0]!r} could not be used ({type(exc).__name__}); the MCP server's log has the reason (what "
        "a policy server or provider answered is never passed to a client)"
    )
