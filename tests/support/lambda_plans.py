"""Read a query plan's lambdas: which JSON parses a lambda repeats for every element.

Spark evaluates a lambda's body once per element of its array or map and hoists nothing
out of it, so a parse inside the body that does not depend on the lambda's own variables
parses the same text again for every element (a row image once per column: a cost that
grows with the square of the table's width).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from pyspark.sql import DataFrame

# As the optimized plan names them (json_object_keys and parse_json are rewritten there
# into calls of their implementations).
PARSES = re.compile(
    r"\b(from_json|get_json_object|json_tuple|json_object_keys|jsonObjectKeys|parse_json"
    r"|parseJson)\("
)
_VARIABLE = re.compile(r"lambda [\w$]+#\d+")


@dataclass(frozen=True)
class Lambda:
    """A lambda of a plan: where its body is in the plan text, and its variables."""

    body_start: int
    body_end: int
    variables: tuple[str, ...]


def _closing(text: str, opening: int) -> int:
    """The position of the parenthesis closing the one at ``opening``."""
    depth = 0
    for at in range(opening, len(text)):
        depth += {"(": 1, ")": -1}.get(text[at], 0)
        if depth == 0:
            return at
    raise ValueError(f"unbalanced plan text from {opening}")


def _top_level_commas(text: str, start: int, end: int) -> list[int]:
    depth, commas = 0, []
    for at in range(start, end):
        depth += {"(": 1, ")": -1, "[": 1, "]": -1}.get(text[at], 0)
        if depth == 0 and text[at] == ",":
            commas.append(at)
    return commas


def lambdas(plan: str) -> list[Lambda]:
    """Every ``lambdafunction(body, lambda x#1, ..., hidden)`` of a plan's text."""
    found = []
    for match in re.finditer(r"lambdafunction\(", plan):
        opening = match.end() - 1
        closing = _closing(plan, opening)
        commas = _top_level_commas(plan, opening + 1, closing)
        arguments = plan[commas[0] + 1 : closing]
        found.append(Lambda(opening + 1, commas[0], tuple(_VARIABLE.findall(arguments))))
    return found


def repeated_parses(plan: str) -> list[str]:
    """The JSON parses inside a lambda that use none of its innermost lambda's variables."""
    found = lambdas(plan)
    repeated = []
    for match in PARSES.finditer(plan):
        enclosing = [f for f in found if f.body_start <= match.start() < f.body_end]
        if not enclosing:
            continue
        innermost = min(enclosing, key=lambda f: f.body_end - f.body_start)
        call = plan[match.start() : _closing(plan, match.end() - 1) + 1]
        if not any(variable in call for variable in innermost.variables):
            repeated.append(call)
    return repeated


def optimized_plan(frame: DataFrame) -> str:
    """The optimized logical plan's text, as Spark prints it."""
    return str(frame._jdf.queryExecution().optimizedPlan().toString())
