"""Whether a step run directory ``OUT/<step>`` of a ``rollbench checkpoints`` folder holds that step's run, by what
the run and the folder record (hostile round 15, F1).

A step is read from the directory's name, so a renamed, swapped or copied step directory would be ranked under a
step it never evaluated. The command writes three records that name the step independently of that name, and each
is checked against it:

* the run's ``identity.name`` (``run.json``): the directory's name when the run was made
  (:func:`rollbench.core.identity.run_identity`);
* ``checkpoints.json``'s ``checkpoint_paths[step]``: the checkpoint folder the command evaluated for the step, whose
  own step is the last number of its folder's name (:mod:`rollbench.checkpoints.discover`'s rule);
* the run's spec: its policy name or a string policy option holds that checkpoint folder (the ``{path}`` the
  command substituted), ending in the same folder name (and ``/pretrained_model`` when it has one).

Each disagreement is a sentence; recorded text is never quoted (only steps and counts), as everywhere a handed-over
folder is described.
"""

from __future__ import annotations

import re
from pathlib import PurePath
from typing import Any

from rollbench.core.runlog_model import RunLog

_NUMBER = re.compile(r"(\d+)(?!.*\d)", re.ASCII)  # the last number of a folder's name, as discover reads a step
_NAME_CHAR = re.compile(r"[A-Za-z0-9_.\-]", re.ASCII)  # a character that continues a folder's name
MODEL = "pretrained_model"


def _step_of(folder_name: str) -> int | None:
    m = _NUMBER.search(folder_name)
    return int(m.group(1)) if m else None


def _tail(path: str) -> tuple[str, str]:
    """The checkpoint folder's name and the path's tail the spec ends with (``/005000/pretrained_model``)."""
    p = PurePath(path)
    if p.name == MODEL:
        return p.parent.name, f"/{p.parent.name}/{MODEL}"
    return p.name, f"/{p.name}"


def _mentions(text: str, tail: str) -> bool:
    """Whether ``text`` holds ``tail`` not followed by more of a folder's name."""
    start = text.find(tail)
    while start >= 0:
        end = start + len(tail)
        if end == len(text) or not _NAME_CHAR.match(text[end]):
            return True
        start = text.find(tail, start + 1)
    return False


def _loaded_steps(texts: list[str]) -> list[int]:
    """The steps of the checkpoint folders ``<name>/pretrained_model`` the spec's strings name (for the message)."""
    steps = {_step_of(m.group(1)) for t in texts for m in re.finditer(rf"/([^/]+)/{MODEL}", t)}
    return sorted(s for s in steps if s is not None)


def step_record_violations(step: int, dir_name: str, log: RunLog, paths: Any) -> list[str]:
    """Sentences naming each record that contradicts the step run directory ``dir_name`` (of ``step``): the run's
    ``identity.name`` (``log``), ``checkpoint_paths`` (``paths``: checkpoints.json's value as read) and the
    checkpoint the run's spec loads. Empty when all agree."""
    found: list[str] = []
    name = log.identity.name if log.identity is not None else dir_name  # a log without one: the spec still checks
    if name != dir_name:
        named = _step_of(name)
        found.append(
            f"its run.json records the run name of step {named}, not {step}"
            if named is not None
            else "its run.json records another run name than its directory's"
        )
    recorded = paths.get(str(step)) if isinstance(paths, dict) else None
    if not isinstance(recorded, str):
        found.append(f"checkpoint_paths in checkpoints.json holds no checkpoint for step {step}")
        return found
    folder, tail = _tail(recorded)
    if _step_of(folder) != step:
        found.append(
            f"checkpoint_paths in checkpoints.json gives step {step} the checkpoint of step {_step_of(folder)}"
        )
    texts = [log.spec.policy] + [v for v in log.spec.policy_options.values() if isinstance(v, str)]
    if not any(_mentions(t, tail) for t in texts):
        loads = _loaded_steps(texts)
        what = f"the checkpoint of step {', '.join(map(str, loads))}" if loads else "another checkpoint"
        found.append(f"the policy in its spec loads {what}, not the one checkpoints.json records for step {step}")
    return found
