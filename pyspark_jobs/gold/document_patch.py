"""How entity-patch ops (add / remove / replace on slash paths) build a document's columns.

A path's first segment names the gold column; the rest navigates inside that column's
JSON (``phone/home`` sets ``home`` in the ``phone`` object; a number indexes a list, ``-``
appends). ``add`` and ``replace`` set the value (creating missing objects on the way),
``remove`` deletes it; on a whole column, ``remove`` sets it to null. Each key's history
is folded in ``seq`` order from nothing, as for TigerGraph (see ``op_fold``).

Patching nested JSON at arbitrary paths has no Spark built-in, and Python UDFs cannot run
inside ``aggregate`` lambdas, so one small Python UDF folds a key's sorted ops. Values
are text as silver gives them: JSON where the text parses as JSON, else a plain string.
"""

from __future__ import annotations

import json
from typing import Any

from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import BooleanType, MapType, StringType, StructField, StructType

from pyspark_jobs.gold.history_events import sorted_history
from pyspark_jobs.gold.net_state import as_net_state

_STATE = StructType(
    [
        StructField("exists", BooleanType()),
        StructField("image", MapType(StringType(), StringType())),
    ]
)


def parse_value(text: str | None) -> Any:
    """Silver's value text as a JSON value (plain text that is not JSON is a string)."""
    if text is None:
        return None
    try:
        return json.loads(text)
    except ValueError:
        return text


def value_text(value: Any) -> str | None:
    """A JSON value as silver's text: strings unquoted, the rest compact JSON."""
    if value is None or isinstance(value, str):
        return value
    return json.dumps(value, separators=(",", ":"))


def _segments(path: str) -> list[str]:
    return [s.replace("~1", "/").replace("~0", "~") for s in path.strip("/").split("/")]


def patch(doc: dict[str, Any], op: str, path: str, value: Any) -> None:
    """Apply one op to ``doc`` (column -> JSON value) in place."""
    *parents, last = _segments(path)
    node: Any = doc
    for seg in parents:
        if isinstance(node, list):
            node = node[int(seg)]
            continue
        if not isinstance(node.get(seg), (dict, list)):
            if op == "remove":
                return
            node[seg] = {}
        node = node[seg]
    if isinstance(node, list):
        index = len(node) if last == "-" else int(last)
        if op == "remove":
            if index < len(node):
                del node[index]
        elif op == "add":
            node.insert(index, value)
        elif index < len(node):
            node[index] = value
    elif op == "remove":
        if parents:
            node.pop(last, None)
        else:
            node[last] = None
    else:
        node[last] = value


def fold_document(history: list[Any]) -> tuple[bool, dict[str, str | None] | None]:
    """``(exists, column -> value text)`` after a key's ops in order."""
    doc: dict[str, Any] | None = None
    for event in history:
        if event["op"] in ("delete", "truncate"):
            doc = None
        elif event["op"] == "upsert":
            image = json.loads(event["row_image"] or "{}")
            doc = dict(image)
        elif event["op"] == "patch":
            doc = {} if doc is None else doc
            for path, change in (event["changes"] or {}).items():
                try:
                    patch(doc, change["op"], path, parse_value(change["value"]))
                except (IndexError, ValueError, TypeError, AttributeError):
                    continue  # a path the document does not have: the op does nothing
    if doc is None:
        return False, None
    return True, {c: value_text(v) for c, v in doc.items()}


_fold_udf = F.udf(fold_document, _STATE, useArrow=False)


def fold_documents(events: DataFrame, value_columns: list[str]) -> DataFrame:
    """Net state of every key in ``events`` (each key's full history)."""
    history = sorted_history(events)
    folded = history.select("_record_key", "h", _fold_udf("h").alias("s"))
    image = F.map_from_arrays(
        F.array(*[F.lit(c) for c in value_columns]).cast("array<string>"),
        F.array(*[F.col("s.image")[c] for c in value_columns]).cast("array<string>"),
    )
    last = F.try_element_at("h", F.lit(-1))
    last_delete = F.try_element_at(
        F.filter("h", lambda e: e["op"].isin("delete", "truncate")), F.lit(-1)
    )
    return as_net_state(
        folded.select(
            "_record_key",
            F.col("s.exists").alias("_live"),
            F.when(F.col("s.exists"), image).alias("_image"),
            last["seq"].alias("_seq"),
            last["change_id"].alias("_change_id"),
            last["source"].alias("_source"),
            last["event_ts"].alias("_event_ts"),
            F.lit(None).alias("_cell_ts"),
            F.when(~F.col("s.exists"), last_delete["seq"]).alias("_tomb_seq"),
        )
    )
