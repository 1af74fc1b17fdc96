"""The project's dbt macros rendered as dbt renders them, for tests that run their SQL
on Spark directly."""

from __future__ import annotations

from pathlib import Path

import jinja2

MACROS = Path(__file__).resolve().parents[2] / "macros"


def macro_sql(name: str, *arguments: str) -> str:
    """The SQL of the project macro ``name`` over these argument expressions. Every macro
    of ``macros/`` is in scope, as in dbt, so a macro may call one from another file."""
    project = "\n".join(path.read_text() for path in sorted(MACROS.glob("*.sql")))
    # dbt's environment has the `do` statement (macros that run queries use it).
    module = jinja2.Environment(extensions=["jinja2.ext.do"]).from_string(project).module
    return str(getattr(module, name)(*arguments))
