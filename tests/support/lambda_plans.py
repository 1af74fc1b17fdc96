"""Read a query plan's lambdas: which JSON parses a lambda repeats for every element.

Spark evaluates a lambda's body once per element of its array or map and hoists nothing
out of it, so a parse inside the body that does not depend on the lambda's own variables
parses the same text again for every element (a row image once per column: a cost that
grows with the square of the table's width).
"""

from __future__ import annotations

from typing import Any

from pyspark.sql import DataFrame

from tests.support.query_plans import seq

# The expressions that parse JSON text, as the optimized plan holds them (json_object_keys
# and parse_json are rewritten there into static calls of their implementations).
PARSE_NODES = {"JsonToStructs", "GetJsonObject", "JsonTuple", "JsonObjectKeys", "ParseJson"}
PARSE_FUNCTIONS = {"jsonObjectKeys", "parseJson"}


def _is_parse(expression: Any) -> bool:
    name = expression.nodeName()
    if name == "StaticInvoke":
        return str(expression.functionName()) in PARSE_FUNCTIONS
    return str(name) in PARSE_NODES


def _variables(expression: Any) -> set[int]:
    """The ids of the lambda variables an expression uses."""
    if expression.nodeName() == "NamedLambdaVariable":
        return {int(expression.exprId().id())}
    return set().union(*(_variables(child) for child in seq(expression.children())))


def _repeated(expression: Any, enclosing: list[set[int]], found: list[str]) -> None:
    if expression.nodeName() == "LambdaFunction":
        own = {int(v.exprId().id()) for v in seq(expression.arguments())}
        _repeated(expression.function(), [*enclosing, own], found)
        return
    if enclosing and _is_parse(expression) and not _variables(expression) & enclosing[-1]:
        found.append(str(expression.toString()))
    for child in seq(expression.children()):
        _repeated(child, enclosing, found)


def repeated_parses(frame: DataFrame) -> list[str]:
    """The JSON parses of the frame's optimized plan that sit inside a lambda and use
    none of the variables of the innermost lambda around them."""
    found: list[str] = []
    plans = [frame._jdf.queryExecution().optimizedPlan()]
    while plans:
        plan = plans.pop()
        for expression in seq(plan.expressions()):
            _repeated(expression, [], found)
        plans.extend(seq(plan.children()))
    return found


def optimized_plan(frame: DataFrame) -> str:
    """The optimized logical plan's text, as Spark prints it."""
    return str(frame._jdf.queryExecution().optimizedPlan().toString())
