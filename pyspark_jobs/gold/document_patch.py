"""How entity-patch ops (add / remove / replace on slash paths) build a document's columns.

A path's first segment names the gold column; the rest navigates inside that column's
JSON (``phone/home`` sets ``home`` in the ``phone`` object; a number indexes a list, ``-``
appends). ``add`` and ``replace`` set the value (creating missing objects on the way),
``remove`` deletes it; on a whole column, ``remove`` sets it to null. Each key's history
is folded in ``seq`` order from nothing, as for TigerGraph (see ``folds/graph.py``); a
``delete`` (silver's op for a ``remove`` of the root path) ends the document, and a later
patch starts a new one from an empty document.

Patching nested JSON at arbitrary paths has no Spark built-in, and Python UDFs cannot run
inside ``aggregate`` lambdas, so one small Python UDF (``folds/documents.py``) folds a
key's sorted ops with ``document_steps``. Values are text as silver gives them: JSON where
the text parses as JSON, else a plain string.
"""

from __future__ import annotations

import json
from typing import Any


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


def document_steps(history: list[Any]) -> list[tuple[bool, dict[str, str | None] | None]]:
    """``(exists, column -> value text)`` after each of a key's ops, in order."""
    doc: dict[str, Any] | None = None
    steps: list[tuple[bool, dict[str, str | None] | None]] = []
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
            steps.append((False, None))
        else:
            steps.append((True, {c: value_text(v) for c, v in doc.items()}))
    return steps


def fold_document(history: list[Any]) -> tuple[bool, dict[str, str | None] | None]:
    """``(exists, column -> value text)`` after all of a key's ops."""
    steps = document_steps(history)
    return steps[-1] if steps else (False, None)
