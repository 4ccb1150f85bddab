"""The small word lists shipped with rollbench for instruction perturbations, proposers and the language test policy.

Hand-written for the instructions of the bundled tasks (MetaWorld, robosuite, LIBERO-style table-top phrases); they
are data, not a model of English. Words are lowercase; :func:`words` is the one tokenizer every user of these lists
applies (lowercase ASCII letters runs, so punctuation and case never matter).
"""

from __future__ import annotations

import re

# word -> synonyms, most natural first (the ``synonym`` perturbation uses the first)
SYNONYMS: dict[str, tuple[str, ...]] = {
    "press": ("push", "hit"),
    "push": ("shove", "nudge"),
    "pull": ("drag", "tug"),
    "pick": ("grab", "take"),
    "place": ("put", "set"),
    "put": ("place", "set"),
    "lift": ("raise", "hoist"),
    "reach": ("touch", "go to"),
    "open": ("unclose",),
    "close": ("shut",),
    "closed": ("shut",),
    "turn": ("rotate", "twist"),
    "slide": ("glide", "move"),
    "insert": ("put", "slot"),
    "sweep": ("brush", "wipe"),
    "unplug": ("pull out",),
    "goal": ("target", "destination"),
    "button": ("switch", "key"),
    "puck": ("disc", "token"),
    "gripper": ("hand", "claw"),
    "door": ("gate",),
    "drawer": ("tray",),
    "plate": ("dish",),
    "mug": ("cup",),
    "cup": ("mug",),
    "handle": ("grip",),
    "lever": ("arm",),
    "dial": ("knob",),
    "faucet": ("tap",),
    "peg": ("pin",),
    "hole": ("opening",),
    "nut": ("ring",),
    "bin": ("box",),
    "lid": ("cover",),
    "table": ("desk",),
    "wall": ("barrier",),
    "cabinet": ("cupboard",),
    "window": ("pane",),
    "ball": ("sphere",),
    "stick": ("rod",),
    "block": ("cube",),
    "cube": ("block",),
    "onto": ("on",),
    "into": ("in",),
}

# nouns naming things in a scene (what ``drop-object`` removes and the language test policy looks for)
OBJECTS: frozenset[str] = frozenset(
    [
        "goal",
        "target",
        "button",
        "switch",
        "puck",
        "disc",
        "door",
        "gate",
        "drawer",
        "tray",
        "plate",
        "dish",
        "mug",
        "cup",
        "handle",
        "lever",
        "dial",
        "knob",
        "faucet",
        "tap",
        "peg",
        "pin",
        "hole",
        "opening",
        "nut",
        "ring",
        "bin",
        "box",
        "lid",
        "cover",
        "table",
        "desk",
        "wall",
        "barrier",
        "cabinet",
        "cupboard",
        "window",
        "pane",
        "ball",
        "sphere",
        "basketball",
        "basket",
        "stick",
        "rod",
        "thermos",
        "hammer",
        "nail",
        "shelf",
        "coffee",
        "machine",
        "lock",
        "block",
        "cube",
        "bowl",
        "bottle",
        "can",
        "cheese",
        "ketchup",
        "sauce",
        "stove",
        "microwave",
        "basket",
        "tray",
        "book",
        "caddy",
        "pot",
        "pan",
        "apple",
    ]
)

# verbs that begin the bundled tasks' instructions
VERBS: frozenset[str] = frozenset(
    [
        "press",
        "push",
        "pull",
        "pick",
        "place",
        "put",
        "lift",
        "reach",
        "open",
        "close",
        "turn",
        "slide",
        "insert",
        "sweep",
        "unplug",
        "grab",
        "take",
        "raise",
        "touch",
        "rotate",
        "twist",
        "glide",
        "move",
        "shove",
        "nudge",
        "drag",
        "tug",
        "hit",
        "set",
        "shut",
        "lock",
        "unlock",
        "dunk",
        "stack",
        "hammer",
        "go",
    ]
)

# words that carry no content for the language test policy and the proposers
STOPWORDS: frozenset[str] = frozenset(
    [
        "a",
        "an",
        "the",
        "it",
        "its",
        "to",
        "of",
        "and",
        "or",
        "with",
        "from",
        "on",
        "onto",
        "in",
        "into",
        "at",
        "up",
        "down",
        "off",
        "out",
        "over",
        "under",
        "by",
        "for",
        "then",
        "please",
        "robot",
        "you",
        "your",
        "could",
        "would",
        "can",
        "now",
        "this",
        "that",
    ]
)

# generic words the ``insert`` proposer may add, besides the words of the task's own instruction
FILLERS: tuple[str, ...] = ("the", "carefully", "slowly", "now", "please", "gently", "quickly", "precisely")

# scene sentences the ``distractor`` perturbation appends (each names an object the bundled tasks never target)
DISTRACTORS: tuple[str, ...] = (
    "there is a red bowl on the left",
    "ignore the green bottle behind it",
    "a blue book lies next to the table edge",
    "do not touch the yellow can",
)

# sentence frames of the ``paraphrase`` perturbation and the ``template`` proposer; {i} = the instruction
FRAMES: tuple[str, ...] = (
    "{i}",
    "please {i}",
    "could you {i}?",
    "your task: {i}.",
    "I need you to {i}",
    "robot, {i}",
    "{i}, then stop",
    "now {i}",
)


def words(text: str) -> list[str]:
    """The lowercase words of ``text`` (runs of ASCII letters); punctuation, digits and case are dropped."""
    return re.findall(r"[a-z]+", text.lower())
