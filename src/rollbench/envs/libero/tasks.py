"""LIBERO's task table: suites, task names in benchmark order, their instructions, and the LIBERO-PRO variants.

Sources: ``libero/libero/benchmark/libero_suite_task_map.py`` (LIBERO, and rpent-libero 0.2.0 which ships the same
file; ``tests/test_env_libero_real.py`` checks that the installed file holds exactly :data:`SUITE_TASKS`), and the
instruction rule of ``grab_language_from_filename`` in ``libero/libero/benchmark/__init__.py``. The table is kept here
so that ``rollbench envs`` lists LIBERO without importing it (its import writes a config file and pulls torch).

LIBERO-PRO's suites and their table are :mod:`rollbench.envs.libero.pro`'s. :data:`LAN_SUITES` names the four
language-perturbed ones (their BDDL files equal the base suite's except the ``(:language ...)`` line; tested).
"""

from __future__ import annotations

import re
from pathlib import Path

from rollbench.core.family import ServedLayout

# What openpi's LIBERO client sends (examples/libero/main.py): both cameras, resized with padding to 224 x 224, the
# env's float64 state. Every LIBERO stack (in-process, libero_ref, liberoplus) declares it, so an openpi LIBERO
# server sees the same keys and sizes whichever stack a run chose.
SERVED = ServedLayout(main_camera="agentview", wrist_camera="robot0_eye_in_hand", image_size=(224, 224))

# Task names in the order of libero_suite_task_map.py. libero_90 is written "SCENE: suffix suffix ..." to stay short
# (each name is SCENE_suffix); the other suites hold one name per line.
_TASK_TABLE = """
[libero_spatial]
pick_up_the_black_bowl_between_the_plate_and_the_ramekin_and_place_it_on_the_plate
pick_up_the_black_bowl_next_to_the_ramekin_and_place_it_on_the_plate
pick_up_the_black_bowl_from_table_center_and_place_it_on_the_plate
pick_up_the_black_bowl_on_the_cookie_box_and_place_it_on_the_plate
pick_up_the_black_bowl_in_the_top_drawer_of_the_wooden_cabinet_and_place_it_on_the_plate
pick_up_the_black_bowl_on_the_ramekin_and_place_it_on_the_plate
pick_up_the_black_bowl_next_to_the_cookie_box_and_place_it_on_the_plate
pick_up_the_black_bowl_on_the_stove_and_place_it_on_the_plate
pick_up_the_black_bowl_next_to_the_plate_and_place_it_on_the_plate
pick_up_the_black_bowl_on_the_wooden_cabinet_and_place_it_on_the_plate
[libero_object]
pick_up_the_alphabet_soup_and_place_it_in_the_basket
pick_up_the_cream_cheese_and_place_it_in_the_basket
pick_up_the_salad_dressing_and_place_it_in_the_basket
pick_up_the_bbq_sauce_and_place_it_in_the_basket
pick_up_the_ketchup_and_place_it_in_the_basket
pick_up_the_tomato_sauce_and_place_it_in_the_basket
pick_up_the_butter_and_place_it_in_the_basket
pick_up_the_milk_and_place_it_in_the_basket
pick_up_the_chocolate_pudding_and_place_it_in_the_basket
pick_up_the_orange_juice_and_place_it_in_the_basket
[libero_goal]
open_the_middle_drawer_of_the_cabinet
put_the_bowl_on_the_stove
put_the_wine_bottle_on_top_of_the_cabinet
open_the_top_drawer_and_put_the_bowl_inside
put_the_bowl_on_top_of_the_cabinet
push_the_plate_to_the_front_of_the_stove
put_the_cream_cheese_in_the_bowl
turn_on_the_stove
put_the_bowl_on_the_plate
put_the_wine_bottle_on_the_rack
[libero_10]
LIVING_ROOM_SCENE2_put_both_the_alphabet_soup_and_the_tomato_sauce_in_the_basket
LIVING_ROOM_SCENE2_put_both_the_cream_cheese_box_and_the_butter_in_the_basket
KITCHEN_SCENE3_turn_on_the_stove_and_put_the_moka_pot_on_it
KITCHEN_SCENE4_put_the_black_bowl_in_the_bottom_drawer_of_the_cabinet_and_close_it
LIVING_ROOM_SCENE5_put_the_white_mug_on_the_left_plate_and_put_the_yellow_and_white_mug_on_the_right_plate
STUDY_SCENE1_pick_up_the_book_and_place_it_in_the_back_compartment_of_the_caddy
LIVING_ROOM_SCENE6_put_the_white_mug_on_the_plate_and_put_the_chocolate_pudding_to_the_right_of_the_plate
LIVING_ROOM_SCENE1_put_both_the_alphabet_soup_and_the_cream_cheese_box_in_the_basket
KITCHEN_SCENE8_put_both_moka_pots_on_the_stove
KITCHEN_SCENE6_put_the_yellow_and_white_mug_in_the_microwave_and_close_it
[libero_90]
KITCHEN_SCENE10: close_the_top_drawer_of_the_cabinet
  close_the_top_drawer_of_the_cabinet_and_put_the_black_bowl_on_top_of_it
  put_the_black_bowl_in_the_top_drawer_of_the_cabinet
  put_the_butter_at_the_back_in_the_top_drawer_of_the_cabinet_and_close_it
  put_the_butter_at_the_front_in_the_top_drawer_of_the_cabinet_and_close_it
  put_the_chocolate_pudding_in_the_top_drawer_of_the_cabinet_and_close_it
KITCHEN_SCENE1: open_the_bottom_drawer_of_the_cabinet open_the_top_drawer_of_the_cabinet
  open_the_top_drawer_of_the_cabinet_and_put_the_bowl_in_it put_the_black_bowl_on_the_plate
  put_the_black_bowl_on_top_of_the_cabinet
KITCHEN_SCENE2: open_the_top_drawer_of_the_cabinet put_the_black_bowl_at_the_back_on_the_plate
  put_the_black_bowl_at_the_front_on_the_plate put_the_middle_black_bowl_on_the_plate
  put_the_middle_black_bowl_on_top_of_the_cabinet
  stack_the_black_bowl_at_the_front_on_the_black_bowl_in_the_middle
  stack_the_middle_black_bowl_on_the_back_black_bowl
KITCHEN_SCENE3: put_the_frying_pan_on_the_stove put_the_moka_pot_on_the_stove turn_on_the_stove
  turn_on_the_stove_and_put_the_frying_pan_on_it
KITCHEN_SCENE4: close_the_bottom_drawer_of_the_cabinet
  close_the_bottom_drawer_of_the_cabinet_and_open_the_top_drawer
  put_the_black_bowl_in_the_bottom_drawer_of_the_cabinet put_the_black_bowl_on_top_of_the_cabinet
  put_the_wine_bottle_in_the_bottom_drawer_of_the_cabinet put_the_wine_bottle_on_the_wine_rack
KITCHEN_SCENE5: close_the_top_drawer_of_the_cabinet put_the_black_bowl_in_the_top_drawer_of_the_cabinet
  put_the_black_bowl_on_the_plate put_the_black_bowl_on_top_of_the_cabinet
  put_the_ketchup_in_the_top_drawer_of_the_cabinet
KITCHEN_SCENE6: close_the_microwave put_the_yellow_and_white_mug_to_the_front_of_the_white_mug
KITCHEN_SCENE7: open_the_microwave put_the_white_bowl_on_the_plate
  put_the_white_bowl_to_the_right_of_the_plate
KITCHEN_SCENE8: put_the_right_moka_pot_on_the_stove turn_off_the_stove
KITCHEN_SCENE9: put_the_frying_pan_on_the_cabinet_shelf put_the_frying_pan_on_top_of_the_cabinet
  put_the_frying_pan_under_the_cabinet_shelf put_the_white_bowl_on_top_of_the_cabinet turn_on_the_stove
  turn_on_the_stove_and_put_the_frying_pan_on_it
LIVING_ROOM_SCENE1: pick_up_the_alphabet_soup_and_put_it_in_the_basket
  pick_up_the_cream_cheese_box_and_put_it_in_the_basket pick_up_the_ketchup_and_put_it_in_the_basket
  pick_up_the_tomato_sauce_and_put_it_in_the_basket
LIVING_ROOM_SCENE2: pick_up_the_alphabet_soup_and_put_it_in_the_basket
  pick_up_the_butter_and_put_it_in_the_basket pick_up_the_milk_and_put_it_in_the_basket
  pick_up_the_orange_juice_and_put_it_in_the_basket pick_up_the_tomato_sauce_and_put_it_in_the_basket
LIVING_ROOM_SCENE3: pick_up_the_alphabet_soup_and_put_it_in_the_tray
  pick_up_the_butter_and_put_it_in_the_tray pick_up_the_cream_cheese_and_put_it_in_the_tray
  pick_up_the_ketchup_and_put_it_in_the_tray pick_up_the_tomato_sauce_and_put_it_in_the_tray
LIVING_ROOM_SCENE4: pick_up_the_black_bowl_on_the_left_and_put_it_in_the_tray
  pick_up_the_chocolate_pudding_and_put_it_in_the_tray pick_up_the_salad_dressing_and_put_it_in_the_tray
  stack_the_left_bowl_on_the_right_bowl_and_place_them_in_the_tray
  stack_the_right_bowl_on_the_left_bowl_and_place_them_in_the_tray
LIVING_ROOM_SCENE5: put_the_red_mug_on_the_left_plate put_the_red_mug_on_the_right_plate
  put_the_white_mug_on_the_left_plate put_the_yellow_and_white_mug_on_the_right_plate
LIVING_ROOM_SCENE6: put_the_chocolate_pudding_to_the_left_of_the_plate
  put_the_chocolate_pudding_to_the_right_of_the_plate put_the_red_mug_on_the_plate
  put_the_white_mug_on_the_plate
STUDY_SCENE1: pick_up_the_book_and_place_it_in_the_front_compartment_of_the_caddy
  pick_up_the_book_and_place_it_in_the_left_compartment_of_the_caddy
  pick_up_the_book_and_place_it_in_the_right_compartment_of_the_caddy
  pick_up_the_yellow_and_white_mug_and_place_it_to_the_right_of_the_caddy
STUDY_SCENE2: pick_up_the_book_and_place_it_in_the_back_compartment_of_the_caddy
  pick_up_the_book_and_place_it_in_the_front_compartment_of_the_caddy
  pick_up_the_book_and_place_it_in_the_left_compartment_of_the_caddy
  pick_up_the_book_and_place_it_in_the_right_compartment_of_the_caddy
STUDY_SCENE3: pick_up_the_book_and_place_it_in_the_front_compartment_of_the_caddy
  pick_up_the_book_and_place_it_in_the_left_compartment_of_the_caddy
  pick_up_the_book_and_place_it_in_the_right_compartment_of_the_caddy
  pick_up_the_red_mug_and_place_it_to_the_right_of_the_caddy
  pick_up_the_white_mug_and_place_it_to_the_right_of_the_caddy
STUDY_SCENE4: pick_up_the_book_in_the_middle_and_place_it_on_the_cabinet_shelf
  pick_up_the_book_on_the_left_and_place_it_on_top_of_the_shelf
  pick_up_the_book_on_the_right_and_place_it_on_the_cabinet_shelf
  pick_up_the_book_on_the_right_and_place_it_under_the_cabinet_shelf
"""


def _parse_table(text: str) -> dict[str, tuple[str, ...]]:
    out: dict[str, list[str]] = {}
    suite, scene = "", ""
    for tok in text.split():
        if tok.startswith("["):
            suite, scene = tok.strip("[]"), ""
            out[suite] = []
        elif tok.endswith(":"):
            scene = tok[:-1]
        else:
            out[suite].append(f"{scene}_{tok}" if scene else tok)
    return {k: tuple(v) for k, v in out.items()}


SUITE_TASKS: dict[str, tuple[str, ...]] = _parse_table(_TASK_TABLE)
"""Suite -> task names (LIBERO's bddl file stems), in LIBERO's benchmark order; task_id is the index."""

LAN_SUITES = {f"{base}_lan": base for base in ("libero_spatial", "libero_object", "libero_goal", "libero_10")}
"""LIBERO-PRO language-perturbed suite -> its base suite (same scenes and task order, paraphrased instructions)."""

_LANGUAGE = re.compile(r"\(:language\s+([^)]+)\)")


def instruction_of(task_file_stem: str) -> str:
    """LIBERO's ``task.language`` for a task name (its ``grab_language_from_filename`` rule)."""
    x = task_file_stem
    if x[0].isupper():  # LIBERO-100 names carry a SCENE prefix: "KITCHEN_SCENE10_close_the_..."
        i = x.find("SCENE")
        x = x[i + (8 if "SCENE10" in x else 7) :]
    return " ".join(x.split("_"))


def bddl_language(path: Path) -> str:
    """The ``(:language ...)`` text of a BDDL file (what the built env calls ``language_instruction``)."""
    m = _LANGUAGE.search(path.read_text())
    if not m:
        raise ValueError(f"{path} has no (:language ...) line")
    return m.group(1).strip()
