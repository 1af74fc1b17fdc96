"""The project's dbt macros rendered as dbt renders them, for tests that run their SQL
on Spark directly."""

from __future__ import annotations

from pathlib import Path

import jinja2

MACROS = Path(__file__).resolve().parents[2] / "macros"


def macro_sql(name: str, *arguments: str, file: str | None = None) -> str:
    """The SQL of the macro ``name`` (defined in ``macros/<file or name>.sql``) over these
    argument expressions."""
    path = MACROS / f"{file or name}.sql"
    module = jinja2.Environment().from_string(path.read_text()).module
    return str(getattr(module, name)(*arguments))
