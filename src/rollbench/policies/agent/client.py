"""A small OpenAI-compatible chat-completions client for LLM agent policies: retries, timeouts, wire capture.

Protocol: ``POST {base_url}/chat/completions`` with ``{"model", "messages", "tools", "tool_choice": "auto", ...}``
and ``Authorization: Bearer KEY`` when a key is set (OpenAI's Chat Completions API reference; served as it is by
OpenAI, OpenRouter, vLLM, Ollama, LiteLLM and most providers). ``GET {base_url}/models`` is used once to check
that the endpoint answers and the key is accepted, before any episode.

Bounds and faults:

* each call must complete within ``timeout_s``, connect, headers and body together (:mod:`rollbench.wire.outbound`;
  the probe too); a redirect is never followed (its status is the reply); a timeout
  raises :class:`~rollbench.core.contracts.InfrastructureError` at once (no retry: the episode ends as ``error``);
* HTTP 429 and 5xx and dropped connections are retried ``retries`` times (:mod:`rollbench.policies.retry`), waiting
  ``backoff_s * 2**attempt`` seconds (or the server's ``Retry-After`` seconds), capped at 60 s; then
  InfrastructureError with the status;
* a ``Retry-After`` that is not a finite number of seconds >= 0 (``nan``, ``inf``, ``-1``, a date) is ignored:
  the backoff above is used instead;
* any other non-2xx status, a body that is not a JSON object and a reply over :data:`MAX_REPLY_BYTES` raise
  InfrastructureError.

Error texts never quote the provider's reply: they name its status and size, and the provider's error type only
when it is one of :data:`KNOWN_ERROR_TYPES` (OpenAI-style ``{"error": {"type"|"code": ...}}``); transport failures
are named by their class (:func:`~rollbench.wire.decode.unquoted_failure`). A provider may put anything in its
body, the key transformed so that no redaction finds it (hostile round 5, F2). The API key is held in memory only.
The wire capture (``--wire-capture``, the user's choice to keep raw exchanges) and the transcripts have the key
replaced by ``<redacted:api_key>`` (:meth:`ChatClient.recorded`: in place, and a body, header value or field that
holds it in another form replaced whole), and captured headers whose names carry credentials (``authorization``,
``*api-key*``, ``cookie``...) are replaced by ``<redacted>`` at capture time.
"""

from __future__ import annotations

import json
import math
import re
import time
from collections.abc import Callable, Mapping
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from rollbench.core.contracts import ConfigError, InfrastructureError
from rollbench.core.secret_echo import SecretEcho, scrubbed
from rollbench.policies.retry import RetryAfter, with_retries
from rollbench.wire.decode import unquoted_failure, unquoted_reply
from rollbench.wire.outbound import http_client, total_deadline

MAX_BACKOFF_S = 60.0
MAX_REPLY_BYTES = 16 * 2**20
"""The most of one provider reply that is read (bytes): a chat completion is a few kB (a long one some hundred)."""
KNOWN_ERROR_TYPES = frozenset(
    (
        "invalid_request_error",
        "authentication_error",
        "permission_error",
        "permission_denied",
        "not_found_error",
        "model_not_found",
        "rate_limit_error",
        "rate_limit_exceeded",
        "insufficient_quota",
        "context_length_exceeded",
        "server_error",
        "api_error",
        "overloaded_error",
        "request_too_large",
        "timeout_error",
    )
)
"""Error types and codes of OpenAI-style providers (OpenAI, OpenRouter, vLLM, LiteLLM; Anthropic's names too) that
an error text may name; anything else a provider says is not shown."""
SECRET_HEADER = re.compile(r"authorization|api[-_]?key|cookie|token|secret", re.IGNORECASE)


def _listed(r: Any, model: str) -> bool | None:
    """Whether a 200 ``/models`` answer ``{"data": [{"id": ...}, ...]}`` lists ``model``; None for any other status or
    form (not JSON, nested too deep to parse, ``data`` not a list): the listing is informational, never a refusal."""
    if r.status_code != 200:
        return None
    try:
        data = r.json()
    except (ValueError, RecursionError):
        return None
    models = data.get("data") if isinstance(data, dict) else None
    if not isinstance(models, list):
        return None
    return any(isinstance(m, dict) and m.get("id") == model for m in models)


class ChatClient:
    """One provider endpoint. ``capture`` (when given) receives one JSON-able dict per HTTP exchange."""

    def __init__(
        self,
        base_url: str,
        api_key: str | None,
        *,
        timeout_s: float,
        connect_timeout_s: float,
        retries: int,
        backoff_s: float,
        capture: Callable[[dict[str, Any]], None] | None = None,
    ) -> None:
        import httpx

        self.base_url = base_url.rstrip("/")
        self._key = api_key or None
        self._echo = SecretEcho({"api_key": self._key or ""})
        self.timeout_s, self.retries, self.backoff_s = timeout_s, retries, backoff_s
        self.capture = capture
        # no redirect followed, a total deadline per exchange (rollbench.wire.outbound)
        self._client = http_client(timeout=httpx.Timeout(timeout_s, connect=connect_timeout_s))

    def redact(self, text: str) -> str:
        """``text`` with the API key replaced (the key must never reach a file)."""
        return text.replace(self._key, "<redacted:api_key>") if self._key else text

    def recorded(self, value: Any) -> Any:
        """``value`` (JSON) as a transcript or the wire capture may hold it: the key replaced in place
        (:meth:`redact`), then every smallest part (a field, a header value, a body) that holds it in another form
        :mod:`rollbench.core.secret_echo` recognises (upper case, base64 of ``Bearer KEY``, reversed, escaped,
        split...) replaced whole by ``<redacted:api_key>``."""
        if not self._key:
            return value
        return scrubbed(value, self._echo, "<redacted:api_key>", self.redact)

    def _headers(self) -> dict[str, str]:
        h = {"content-type": "application/json"}
        if self._key:
            h["authorization"] = f"Bearer {self._key}"
        return h

    def probe(self, model: str) -> dict[str, Any]:
        """``GET /models``: ConfigError when unreachable or the key is refused; returns what was learnt."""
        import httpx

        try:
            with total_deadline(self.timeout_s):
                r = self._client.get(f"{self.base_url}/models", headers=self._headers())
        except httpx.HTTPError as exc:
            raise ConfigError(f"cannot reach the model API at {self.base_url} ({unquoted_failure(exc)})") from None
        if r.status_code in (401, 403):
            raise ConfigError(
                f"the model API at {self.base_url} refused the API key: {provider_said(r.status_code, r.content)}"
            )
        return {"models_endpoint_status": r.status_code, "model_listed": _listed(r, model)}

    def complete(self, body: dict[str, Any], turn: int) -> tuple[dict[str, Any], list[dict[str, Any]]]:
        """POST one chat completion; return ``(reply JSON, attempts)``; ``attempts`` has per try ``status``,
        ``duration_s`` and ``waited_s`` before it. Raises InfrastructureError (see the module docstring)."""
        import httpx

        payload = json.dumps(body).encode()
        url = f"{self.base_url}/chat/completions"
        attempts: list[dict[str, Any]] = []
        wait = 0.0  # before the next try: set by a failed one

        def attempt(n: int) -> dict[str, Any]:
            nonlocal wait
            t0 = time.perf_counter()
            rec: dict[str, Any] = {"attempt": n, "waited_s": wait}
            attempts.append(rec)
            try:
                status, headers, text = self._post(url, payload)
            except httpx.TimeoutException:
                self._capture(turn, n, url, payload, None, None, "timeout")
                raise InfrastructureError(
                    f"no reply from the model API {url} within timeout_s={self.timeout_s:g} s (turn {turn})"
                ) from None
            except httpx.TransportError as exc:
                rec.update(status=None, error=unquoted_failure(exc))
                self._capture(turn, n, url, payload, None, None, rec["error"])
                wait = self._backoff(n, None)
                raise RetryAfter(wait) from None
            rec.update(status=status, duration_s=time.perf_counter() - t0)
            self._capture(turn, n, url, payload, status, headers, text)
            if status == 429 or status >= 500:
                wait = self._backoff(n, headers.get("retry-after"))
                rec["error"] = provider_said(status, text.encode())
                raise RetryAfter(wait)
            return self._reply_of(url, status, text)

        try:
            reply = with_retries(
                attempt,
                retries=self.retries,
                first_wait_s=self.backoff_s,
                max_wait_s=MAX_BACKOFF_S,
                retry_on=lambda e: isinstance(e, RetryAfter),
            )
        except RetryAfter:
            last = attempts[-1]
            raise InfrastructureError(
                f"the model API {url} failed {len(attempts)} times (last: {last.get('error', '')}); gave up after "
                f"{self.retries} retries with backoff (turn {turn})"
            ) from None
        return reply, attempts

    def _reply_of(self, url: str, status: int, text: str) -> dict[str, Any]:
        """The JSON object of a final (not retried) reply; InfrastructureError for an error status or a body that
        is not a JSON object."""
        if not 200 <= status < 300:
            raise InfrastructureError(f"the model API {url} answered {provider_said(status, text.encode())}")
        try:
            reply = json.loads(text)
        except (ValueError, RecursionError):  # RecursionError: nested too deep to parse
            reply = None
        if not isinstance(reply, dict):
            raise InfrastructureError(
                f"the model API {url} sent a body that is not a JSON object (HTTP {status}, {len(text.encode())} bytes)"
            )
        return reply

    def _backoff(self, attempt: int, retry_after: str | None) -> float:
        """Seconds to wait before the next try: the server's ``Retry-After`` seconds when it is a finite number >= 0
        (capped at MAX_BACKOFF_S), else ``backoff_s * 2**attempt`` (also capped): ``nan``, ``inf``, negative
        numbers and HTTP dates fall back to the backoff, never reach ``time.sleep``."""
        try:
            asked = float(retry_after) if retry_after is not None else math.nan
        except ValueError:
            asked = math.nan
        if math.isfinite(asked) and asked >= 0:
            return min(asked, MAX_BACKOFF_S)
        return min(self.backoff_s * 2**attempt, MAX_BACKOFF_S)

    def _post(self, url: str, payload: bytes) -> tuple[int, dict[str, str], str]:
        import httpx

        deadline = time.monotonic() + self.timeout_s
        with (
            total_deadline(self.timeout_s),
            self._client.stream("POST", url, content=payload, headers=self._headers()) as r,
        ):
            parts, size = [], 0
            for part in r.iter_bytes():  # watchdog: a reply trickling in slower than timeout_s is cut off
                parts.append(part)
                size += len(part)
                if size > MAX_REPLY_BYTES:
                    raise InfrastructureError(f"the model API {url} sent a reply larger than {MAX_REPLY_BYTES} bytes")
                if time.monotonic() > deadline:
                    raise httpx.ReadTimeout("reply body still arriving after timeout_s")
            return r.status_code, {k.lower(): v for k, v in r.headers.items()}, b"".join(parts).decode(errors="replace")

    def _capture(
        self,
        turn: int,
        attempt: int,
        url: str,
        payload: bytes,
        status: int | None,
        headers: dict[str, str] | None,
        text: str,
    ) -> None:
        if self.capture is None:
            return
        self.capture(
            self.recorded(
                {
                    "turn": turn,
                    "attempt": attempt,
                    "time": time.time(),
                    "request": {
                        "method": "POST",
                        "url": url,
                        "headers": self.redact_headers(self._headers()),
                        "body": self.redact(payload.decode()),
                    },
                    "response": None
                    if status is None
                    else {"status": status, "headers": self.redact_headers(headers or {}), "body": self.redact(text)},
                    "error": None if status is not None else self.redact(text),
                }
            )
        )

    def redact_headers(self, headers: dict[str, str]) -> dict[str, str]:
        return {k: "<redacted>" if SECRET_HEADER.search(k) else self.redact(v) for k, v in headers.items()}

    def close(self) -> None:
        self._client.close()


def public_url(url: str) -> str:
    """``url`` without user name, password, query or fragment (what may be recorded)."""
    p = urlsplit(url)
    host = p.hostname or ""
    netloc = f"{host}:{p.port}" if p.port else host
    return urlunsplit((p.scheme, netloc, p.path, "", ""))


def provider_said(status: int, body: bytes) -> str:
    """What a provider's error reply says, in rollbench's words: ``"HTTP 400 (invalid_request_error), a reply of 212
    bytes (not shown: ...)"``. The type is shown only when the body is OpenAI's ``{"error": {"type": T}}`` (or
    ``"code"``) with ``T`` in :data:`KNOWN_ERROR_TYPES`; the body itself never."""
    kind = None
    try:
        error = json.loads(body).get("error")
    except (ValueError, AttributeError, RecursionError):
        error = None
    if isinstance(error, dict):
        said = [error.get(k) for k in ("type", "code")]
        kind = next((k for k in said if isinstance(k, str) and k in KNOWN_ERROR_TYPES), None)
    return unquoted_reply(f"HTTP {status}" + (f" ({kind})" if kind else ""), len(body))


MAX_PRICE_PER_MTOK = 1e6
"""The highest ``price_per_mtok`` accepted (USD per million tokens; the dearest models cost some hundreds)."""


def parse_prices(value: Any) -> tuple[float, float] | None:
    """``price_per_mtok`` ``{"input": USD, "output": USD}`` (per million tokens) -> ``(input, output)``, or None
    when not given; raises ConfigError for any other form, naming the price: each must be a number (not text, not a
    bool) from 0 to :data:`MAX_PRICE_PER_MTOK`, so that no price makes a cost infinite or NaN."""
    if value is None:
        return None
    if not isinstance(value, dict) or set(value) != {"input", "output"}:
        raise ConfigError('price_per_mtok must be {"input": USD, "output": USD} per million tokens')
    prices = []
    for side in ("input", "output"):
        p = value[side]
        if isinstance(p, bool) or not isinstance(p, int | float) or not 0 <= p <= MAX_PRICE_PER_MTOK:
            raise ConfigError(
                f"policy option price_per_mtok.{side} must be a number of USD per million tokens from 0 to {MAX_PRICE_PER_MTOK:g}, "
                f"got {p!r}"
            )
        prices.append(float(p))
    return prices[0], prices[1]


MAX_TOKEN_COUNT = 10**12  # tokens one call may report; a larger count is no count rollbench records
TOKEN_KEYS = ("prompt_tokens", "completion_tokens", "total_tokens")


def usage_count(usage: Mapping[str, Any], key: str) -> tuple[int | None, str | None]:
    """The provider's ``usage[key]`` as a token count: ``(n, None)`` for a whole number from 0 to
    :data:`MAX_TOKEN_COUNT` (an integral float such as ``12.0`` included), ``(None, None)`` when absent or null, and
    ``(None, reason)`` for anything else (text, a bool, a fraction, a negative, ``1e400``, a list). The reason names
    the field and the value's JSON type only, never the value (a provider's text may carry the key)."""
    value = usage.get(key)
    if value is None:
        return None, None
    if isinstance(value, int | float) and not isinstance(value, bool):
        if isinstance(value, int) and 0 <= value <= MAX_TOKEN_COUNT:
            return value, None
        if isinstance(value, float) and math.isfinite(value) and value.is_integer() and 0 <= value <= MAX_TOKEN_COUNT:
            return int(value), None
        return None, f"the provider's usage.{key} is not a whole number of tokens from 0 to {MAX_TOKEN_COUNT:,}"
    kind = {str: "text", list: "a list", dict: "an object", bool: "a bool"}.get(type(value), "not a number")
    return None, f"the provider's usage.{key} is {kind}, not a number of tokens"


def call_usage(
    usage: Mapping[str, Any], prices: tuple[float, float] | None
) -> tuple[dict[str, int | None], float | None, str | None]:
    """One model call's token counts (:data:`TOKEN_KEYS`; None when absent or not a count, see
    :func:`usage_count`), its cost in USD and, when the cost cannot be known, why (:func:`call_cost`). A count that
    is not a count makes the cost null with that reason: the provider's usage is not trusted for pricing."""
    counts: dict[str, int | None] = {}
    reasons = []
    for k in TOKEN_KEYS:
        counts[k], why = usage_count(usage, k)
        if why:
            reasons.append(why)
    if reasons:
        return counts, None, "; ".join(reasons)
    cost, cost_error = call_cost(usage, prices)
    return counts, cost, cost_error


def call_cost(usage: Mapping[str, Any], prices: tuple[float, float] | None) -> tuple[float | None, str | None]:
    """One model call's cost in USD and, when it cannot be known, why: from ``prices`` (USD per million prompt /
    completion tokens) when given, else the provider's own ``usage.cost`` (OpenRouter reports it), else
    ``(None, None)``. A cost that is not a finite number (a provider's ``NaN`` or ``Infinity``) or token counts that
    are not counts (:func:`usage_count`) give ``(None, reason)``: recorded as null with the reason, never as a
    non-JSON number, never quoting the provider's value."""
    if prices is not None:
        tokens = []
        for k in ("prompt_tokens", "completion_tokens"):
            n, why = usage_count(usage, k)
            if why:
                return None, why
            tokens.append(n or 0)
        return (tokens[0] * prices[0]) / 1e6 + (tokens[1] * prices[1]) / 1e6, None
    reported = usage.get("cost")
    if not isinstance(reported, int | float) or isinstance(reported, bool):
        return None, None
    try:
        value = float(reported)
    except OverflowError:
        value = math.inf
    if not math.isfinite(value):
        return None, f"the provider reported usage.cost {value!r}, not a finite number"
    return value, None
