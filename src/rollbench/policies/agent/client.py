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
* any other non-2xx status and a body that is not a JSON object raise InfrastructureError.

The API key is held in memory only. Every text that leaves this module (error messages, wire capture) has the key
replaced by ``<redacted:api_key>``, and captured headers whose names carry credentials (``authorization``,
``*api-key*``, ``cookie``...) are replaced by ``<redacted>`` at capture time.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable, Mapping
from typing import Any

from rollbench.core.contracts import ConfigError, InfrastructureError
from rollbench.policies.retry import RetryAfter, with_retries
from rollbench.wire.outbound import http_client, total_deadline

MAX_BACKOFF_S = 60.0
SECRET_HEADER = re.compile(r"authorization|api[-_]?key|cookie|token|secret", re.IGNORECASE)


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
        self.timeout_s, self.retries, self.backoff_s = timeout_s, retries, backoff_s
        self.capture = capture
        # no redirect followed, a total deadline per exchange (rollbench.wire.outbound)
        self._client = http_client(timeout=httpx.Timeout(timeout_s, connect=connect_timeout_s))

    def redact(self, text: str) -> str:
        """``text`` with the API key replaced (the key must never reach a file)."""
        return text.replace(self._key, "<redacted:api_key>") if self._key else text

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
            raise ConfigError(
                self.redact(f"cannot reach the model API at {self.base_url} ({type(exc).__name__}: {exc})")
            ) from None
        if r.status_code in (401, 403):
            raise ConfigError(
                self.redact(
                    f"the model API at {self.base_url} refused the API key: HTTP {r.status_code} {r.text[:300]}"
                )
            )
        listed: bool | None = None
        if r.status_code == 200:
            try:
                ids = [m.get("id") for m in r.json().get("data", []) if isinstance(m, dict)]
                listed = model in ids
            except (ValueError, AttributeError):
                listed = None
        return {"models_endpoint_status": r.status_code, "model_listed": listed}

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
                rec.update(status=None, error=self.redact(f"{type(exc).__name__}: {exc}"))
                self._capture(turn, n, url, payload, None, None, rec["error"])
                wait = self._backoff(n, None)
                raise RetryAfter(wait) from None
            rec.update(status=status, duration_s=time.perf_counter() - t0)
            self._capture(turn, n, url, payload, status, headers, text)
            if status == 429 or status >= 500:
                wait = self._backoff(n, headers.get("retry-after"))
                rec["error"] = self.redact(text[:300])
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
                self.redact(
                    f"the model API {url} failed {len(attempts)} times (HTTP {last.get('status')}: "
                    f"{last.get('error', '')}); gave up after {self.retries} retries with backoff (turn {turn})"
                )
            ) from None
        return reply, attempts

    def _reply_of(self, url: str, status: int, text: str) -> dict[str, Any]:
        """The JSON object of a final (not retried) reply; InfrastructureError for an error status or a body that
        is not a JSON object."""
        if not 200 <= status < 300:
            raise InfrastructureError(self.redact(f"the model API {url} answered HTTP {status}: {text[:1000]}"))
        try:
            reply = json.loads(text)
        except ValueError:
            reply = None
        if not isinstance(reply, dict):
            raise InfrastructureError(self.redact(f"the model API {url} sent a body that is not JSON: {text[:300]!r}"))
        return reply

    def _backoff(self, attempt: int, retry_after: str | None) -> float:
        try:
            if retry_after is not None:
                return min(max(float(retry_after), 0.0), MAX_BACKOFF_S)
        except ValueError:
            pass
        return min(self.backoff_s * 2**attempt, MAX_BACKOFF_S)

    def _post(self, url: str, payload: bytes) -> tuple[int, dict[str, str], str]:
        import httpx

        deadline = time.monotonic() + self.timeout_s
        with (
            total_deadline(self.timeout_s),
            self._client.stream("POST", url, content=payload, headers=self._headers()) as r,
        ):
            parts = []
            for part in r.iter_bytes():  # watchdog: a reply trickling in slower than timeout_s is cut off
                parts.append(part)
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

    def redact_headers(self, headers: dict[str, str]) -> dict[str, str]:
        return {k: "<redacted>" if SECRET_HEADER.search(k) else self.redact(v) for k, v in headers.items()}

    def close(self) -> None:
        self._client.close()


def parse_prices(value: Any) -> tuple[float, float] | None:
    """``price_per_mtok`` ``{"input": USD, "output": USD}`` (per million tokens) -> ``(input, output)``, or None
    when not given; raises ConfigError for any other form."""
    if value is None:
        return None
    try:
        return float(value["input"]), float(value["output"])
    except (KeyError, TypeError, ValueError):
        raise ConfigError('price_per_mtok must be {"input": USD, "output": USD} per million tokens') from None


def call_cost(usage: Mapping[str, Any], prices: tuple[float, float] | None) -> float | None:
    """One model call's cost in USD: from ``prices`` (USD per million prompt / completion tokens) when given, else
    the provider's own ``usage.cost`` (OpenRouter reports it), else None."""
    if prices is not None:
        return (int(usage.get("prompt_tokens") or 0) * prices[0]) / 1e6 + (
            int(usage.get("completion_tokens") or 0) * prices[1]
        ) / 1e6
    cost = usage.get("cost")
    return float(cost) if isinstance(cost, int | float) and not isinstance(cost, bool) else None
