"""The check every net state passes before it may be merged: key and values of its types.

Silver already rejects records whose key is missing or of the wrong type; this is the
second line of defence, and the only one for values. A state whose key column is missing
or does not cast, or whose value does not cast to its declared type, is diverted to
``lakehouse.gold_rejects`` with the reason and is never merged: gold holds no NULL key, no
key made of the wrong text and no value silently turned into a NULL.
"""

from __future__ import annotations

from pyspark.sql import Column
from pyspark.sql import functions as F

from pyspark_jobs.gold.folds.shared import TABLE_WIDE_KEY
from pyspark_jobs.gold.typed_values import canonical_text

# A reason quotes at most this much of a value (a 5 MB value makes a short reason).
_SHOWN = 200


def quoted(text: Column) -> Column:
    """``text`` as a JSON string literal, cut to its first characters."""
    cut = F.when(F.length(text) > _SHOWN, F.concat(F.substring(text, 1, _SHOWN), F.lit("...")))
    return F.regexp_extract(F.to_json(F.array(cut.otherwise(text))), r"^\[(.*)\]$", 1)


def _problem(
    what: Column, text: Column, declared: Column, types: tuple[str, ...], exact: bool = True
) -> Column:
    # Keys cast as silver's key check does (not ``exact``); values must cast without loss.
    return F.when(
        text.isNotNull() & canonical_text(text, declared, types, exact).isNull(),
        F.concat(what, F.lit(" is not a "), declared, F.lit(": "), quoted(text)),
    )


def reject_reason(types: tuple[str, ...]) -> Column:
    """Why a net state may not be merged, or null.

    Reads the net-state columns and the specs' ``key_columns``, ``value_columns`` and
    ``types``; ``types`` lists every type those may name.
    """
    key = F.from_json(F.col("_record_key"), "map<string, string>")
    declared = F.col("types")
    key_problems = F.transform(
        F.col("key_columns"),
        lambda k: F.when(
            key[k].isNull(), F.concat(F.lit("key column "), k, F.lit(" is missing"))
        ).otherwise(
            _problem(F.concat(F.lit("key column "), k), key[k], declared[k], types, exact=False)
        ),
    )
    value_problems = F.transform(
        F.col("value_columns"),
        lambda c: _problem(F.concat(F.lit("column "), c), F.col("_image")[c], declared[c], types),
    )
    problems = F.filter(
        F.concat(
            key_problems,
            F.when(F.col("_live"), value_problems).otherwise(F.array().cast("array<string>")),
        ),
        lambda p: p.isNotNull(),
    )
    # The table-wide tombstone of a truncate has no key by design and is never merged.
    return F.when(
        (F.col("_record_key") != TABLE_WIDE_KEY) & (F.size(problems) > 0),
        F.array_join(problems, "; "),
    )
