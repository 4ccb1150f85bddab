"""``metaworld-lang-expert``: MetaWorld's scripted expert made language-conditioned, a test policy for instruction work.

A real policy whose success depends on the words it is given, so instruction sweeps and the instruction optimiser can
be tested end to end (in-process and through ``rollbench serve-policy``, where the instruction the server receives
is what drives it). It is not a model of any VLA; it is a documented, exactly predictable stand-in.

Precision of an instruction for a task (words via :func:`rollbench.core.lexicon.words`; exact words, so a
synonym does not count). From the task's own instruction (:data:`rollbench.envs.metaworld.INSTRUCTIONS`) come its
*target* words (:data:`~rollbench.core.lexicon.OBJECTS` in it), its *verb* (the first
:data:`~rollbench.core.lexicon.VERBS` word) and its *detail* words (every other word not in
:data:`~rollbench.core.lexicon.STOPWORDS`). The level of an instruction is

* 0 when it names none of the target words,
* 1 when it names a target word, 2 when it also names the verb, 3 when it also names every detail word;
* minus one for naming any other object (a distractor), never below 0.

Level -> *attention* ``q``: ``(0, 0.2, 0.8, 1.0)``, the probability that the policy acts in an episode. Whether it
acts is ``u < q`` with ``u = numpy.random.default_rng([seed, 0x4C414E47]).random()`` drawn from the episode's seed
alone, so a more precise instruction acts on a superset of the seeds another one acts on (nested: paired comparisons
are exact). Acting = MetaWorld's expert actions ``float32 (1, 4)`` (:mod:`.metaworld_expert`); not acting = zero
actions (the arm holds still). On tasks the expert always solves within the horizon (reach-v3, button-press-v3),
the expected success rate of an instruction is its ``q``.

Options: ``{"mode": "coin", "p": 0.5}`` replaces the precision rule by a coin per (seed, instruction): ``u`` is drawn
from ``default_rng([seed, crc32(instruction)])`` and the policy acts when ``u < p``. The words then change outcomes
only by chance: the control policy for selection bias (an optimiser that "finds" a better instruction for it has
fooled itself).
"""

from __future__ import annotations

import zlib
from collections.abc import Mapping
from typing import Any

import numpy as np

from rollbench.core.contracts import ConfigError, Observation, PolicyInfo, TaskInfo
from rollbench.core.lexicon import OBJECTS, STOPWORDS, VERBS, words
from rollbench.core.registry import policy_options
from rollbench.policies.metaworld_expert import MetaWorldExpert

NAME = "metaworld-lang-expert"
ATTENTION: tuple[float, ...] = (0.0, 0.2, 0.8, 1.0)
SEED_SALT = 0x4C414E47  # "LANG"
MODES = ("precision", "coin")


def instruction_level(task_instruction: str, instruction: str) -> int:
    """Precision level 0..3 of ``instruction`` for a task whose own instruction is ``task_instruction``."""
    ref, said = words(task_instruction), set(words(instruction))
    targets = [w for w in ref if w in OBJECTS]
    verb = next((w for w in ref if w in VERBS), None)
    details = [w for w in ref if w not in OBJECTS and w not in STOPWORDS and w != verb]
    if not targets or not said & set(targets):
        return 0
    level = 1
    if verb is None or verb in said:
        level = 2
        if all(d in said for d in details):
            level = 3
    if said & (OBJECTS - set(ref)):
        level -= 1
    return max(level, 0)


def attention(task_instruction: str, instruction: str) -> float:
    """Probability ``q`` that the policy acts in an episode given ``instruction`` (see the module docstring)."""
    return ATTENTION[instruction_level(task_instruction, instruction)]


def acts(seed: int, task_instruction: str, instruction: str, mode: str = "precision", p: float = 0.5) -> bool:
    """Whether the policy acts in the episode of ``seed`` told ``instruction`` (the rule of the module docstring)."""
    if mode == "coin":
        return bool(np.random.default_rng([seed, zlib.crc32(instruction.encode("utf-8"))]).random() < p)
    return bool(np.random.default_rng([seed, SEED_SALT]).random() < attention(task_instruction, instruction))


class MetaWorldLangExpert:
    """MetaWorld's expert that acts only on instructions naming the target object (module docstring).

    ``reset(task, seed)`` as :class:`MetaWorldExpert`; ``act(observation, instruction)`` -> ``float32 (1, 4)``.
    """

    def __init__(self, name: str = NAME, mode: str = "precision", p: float = 0.5) -> None:
        self.expert = MetaWorldExpert(name)
        self.mode, self.p = mode, p
        self.info = PolicyInfo(
            name=name,
            chunk_size=1,
            bounded=True,
            provenance={**self.expert.info.provenance, "language_rule": f"{NAME} {mode}", "attention": ATTENTION},
        )
        self._task: TaskInfo | None = None
        self._seed = 0
        self._reference = ""
        self._decided: dict[str, bool] = {}

    def reset(self, task: TaskInfo, seed: int) -> None:
        from rollbench.envs.metaworld import INSTRUCTIONS

        self.expert.reset(task, seed)
        self._task = task
        self._seed = int(seed)
        self._decided = {}
        self._reference = INSTRUCTIONS[task.name.split("/", 1)[1]]

    def act(self, observation: Observation, instruction: str) -> np.ndarray:
        if self._task is None:
            raise RuntimeError(f"{NAME}: call reset(task, seed) before act()")
        if instruction not in self._decided:
            self._decided[instruction] = acts(self._seed, self._reference, instruction, self.mode, self.p)
        action = self.expert.act(observation, instruction)
        return action if self._decided[instruction] else np.zeros_like(action)

    def close(self) -> None:
        self.expert.close()


@policy_options(mode=str, p=(int, float))
def make_metaworld_lang_expert(name: str, options: Mapping[str, Any]) -> MetaWorldLangExpert:
    """MetaWorld's expert acting only when the instruction names the target object (a language test policy)."""
    mode = str(options.get("mode", "precision"))
    if mode not in MODES:
        raise ConfigError(f"{NAME}: unknown mode {mode!r}; valid modes: {', '.join(MODES)}")
    p = float(options.get("p", 0.5))
    if not 0.0 <= p <= 1.0:
        raise ConfigError(f"{NAME}: p must be within [0, 1], got {p}")
    return MetaWorldLangExpert(name, mode, p)
