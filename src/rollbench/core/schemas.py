"""Write the JSON Schemas of run.json and of the grade document: ``python -m rollbench.core.schemas [DIR]``.

Writes ``DIR/run.schema.json`` (:class:`rollbench.core.runlog_model.RunLog`) and ``DIR/grade.schema.json``
(:class:`rollbench.core.grade_model.GradeDocument`); DIR defaults to ``docs``. JSON Schema draft 2020-12, as
pydantic generates it (https://docs.pydantic.dev/latest/concepts/json_schema/).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from pydantic import BaseModel

from rollbench.core.grade_model import GradeDocument
from rollbench.core.runlog_model import RunLog

SCHEMAS: dict[str, type[BaseModel]] = {"run.schema.json": RunLog, "grade.schema.json": GradeDocument}
DRAFT = "https://json-schema.org/draft/2020-12/schema"


def schema_text(model: type[BaseModel]) -> str:
    """The schema file's exact text: the model's JSON Schema with ``$schema``, indented 2, ending in a newline."""
    return json.dumps({"$schema": DRAFT, **model.model_json_schema()}, indent=2, ensure_ascii=False) + "\n"


def main(argv: list[str]) -> None:
    out = Path(argv[0]) if argv else Path("docs")
    for name, model in SCHEMAS.items():
        (out / name).write_text(schema_text(model))
        print(out / name)


if __name__ == "__main__":
    main(sys.argv[1:])
