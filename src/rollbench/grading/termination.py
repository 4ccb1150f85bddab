"""An episode's termination reason against its steps, as the episode loop (:mod:`rollbench.run.episode`) sets it.

* ``max_steps`` only at the horizon;
* ``success`` only under ``any_step``, on the first step that completes the hold; an ``any_step`` success always
  ends the episode there, as ``success``;
* ``error`` never after a step that ended the episode (an ``any_step`` success held on its last step, or the
  horizon's last step) unless something recorded explains it: after the last step only two things can still fail,
  the images checked once more (a frozen camera: ``rollbench/render_failure`` set, an environment error) and the
  policy's ``finish_episode`` hook (its error recorded as :data:`~rollbench.core.episode.FINISH_EPISODE_ERROR` + the
  exception). An error raised by a step, a reset or a policy call leaves that step unrecorded, so the steps before it
  never ended the episode. Hostile round 15, F2: a row relabelled ``error`` over steps that reached success, moving
  the episode out of a rate or a pair, is named. Runs recorded before the prefix existed whose ``finish_episode``
  raised after such a step are named too (an agent's transcript hook failing on its last step).
"""

from __future__ import annotations

from dataclasses import dataclass

from rollbench.core.episode import FINISH_EPISODE_ERROR, held_success


@dataclass(frozen=True)
class Ending:
    """What an episode row records about its end: ``reason`` (termination), ``rule`` (success rule), ``horizon``
    (max steps); for an error its ``error`` text, ``fault`` and ``render_failure`` (None when none)."""

    reason: str
    rule: str
    horizon: int
    error: str | None = None
    fault: str | None = None
    render_failure: str | None = None


def check_termination(e: int, end: Ending, length: int, successes: list[bool], hold: int, out: list[str]) -> None:
    """Append to ``out`` a violation for each way episode ``e``'s termination (``end``) does not fit its ``length``
    steps and their ``successes`` (``next.success`` in frame order) under a success hold of ``hold`` steps."""
    reason, rule = end.reason, end.rule
    held = held_success(successes, hold)
    if reason == "max_steps" and length != end.horizon:
        out.append(f"episode {e}: termination max_steps after {length} steps, but its horizon is {end.horizon} steps")
    first = held and not held_success(successes[:-1], hold)  # the hold is first reached on the last step
    if reason == "success" and (rule != "any_step" or not first):
        out.append(
            f"episode {e}: termination success, but its step data does not reach the success rule "
            f"({rule}, hold {hold}) first on its last step"
        )
    if reason != "success" and rule == "any_step" and held and (reason != "error" or not first):
        out.append(f"episode {e}: termination {reason}, but its step data reached success (hold {hold}) before it")
    elif reason == "error" and not _explained(end) and ((rule == "any_step" and first) or length == end.horizon):
        ended = (
            f"reached success (hold {hold}) on its last step"
            if rule == "any_step" and first
            else f"ran all {length} steps of its horizon"
        )
        out.append(
            f"episode {e}: termination error ({end.fault or 'unclassified'} fault), but its step data {ended}, which "
            "ends the episode; nothing recorded explains an error after it (no rollbench/render_failure, not a "
            "policy.finish_episode error)"
        )


def _explained(end: Ending) -> bool:
    """An error after the step that ended the episode: a render failure found then, or the finish_episode hook's."""
    return end.render_failure is not None or (end.error or "").startswith(FINISH_EPISODE_ERROR)
