"""How a JSON escape of a lone UTF-16 surrogate is found.

``"\\ud800"`` is valid JSON text but no Unicode character: Spark's JSON functions read
``"x\\ud800y"`` as ``x?y`` (``from_json``) or as null (``get_json_object``), so the change
would reach gold altered and nobody told. Bronze quarantines such a record instead,
naming the escape and where it is. A pair (``"\\ud83d\\ude00"``, an emoji) is a
character and lands as usual.
"""

from __future__ import annotations

from pyspark.sql import Column
from pyspark.sql import functions as F

# An escaped backslash, which hides the `u` after it from being read as an escape.
_ESCAPED_BACKSLASH = r"\\\\"
# A high surrogate escape without a low one right after it, or a low one without a high one
# right before it.
_LONE_SURROGATE = (
    r"\\u[dD][89abAB][0-9a-fA-F]{2}(?!\\u[dD][c-fC-F][0-9a-fA-F]{2})"
    r"|(?<!\\u[dD][89abAB][0-9a-fA-F]{2})\\u[dD][c-fC-F][0-9a-fA-F]{2}"
)


def one_character_per_byte(text: Column) -> Column:
    """``text`` read as ISO-8859-1, one character per byte of its UTF-8: positions found in
    it (``regexp_instr``) count bytes, whatever the text before them."""
    return F.decode(text.cast("binary"), "ISO-8859-1")


def lone_surrogate_escape(text: Column) -> Column:
    """The first JSON escape in ``text`` of a lone UTF-16 surrogate, as a struct of ``at``
    (its 0-based byte offset) and ``escape`` (its six characters); null when there is none.

    Escaped backslashes are masked first, left to right as a JSON parser reads them, so
    that ``\\\\ud800`` (a backslash, then text) is not taken for an escape. The text is read
    one character per byte (ISO-8859-1), so ``at`` counts bytes.

    >>> # '{"n":"a\\ud800b"}'  ->  {at: 7, escape: '\\ud800'}
    """
    masked = F.regexp_replace(one_character_per_byte(text), _ESCAPED_BACKSLASH, "__")
    position = F.regexp_instr(masked, F.lit(_LONE_SURROGATE))
    found = F.when(
        position > 0,
        F.struct((position - 1).alias("at"), F.substring(masked, position, 6).alias("escape")),
    )
    # Most text holds no \u escape at all: a substring search spares it the regexes.
    return F.when(text.contains("\\u"), found)


def lone_surrogate_reason(text: Column, where: str) -> Column:
    """The quarantine reason for a lone surrogate escape in ``text``, null when it has none;
    ``where`` names the text in the reason ("the line", "the value")."""
    found = lone_surrogate_escape(text)
    return F.when(
        found.isNotNull(),
        F.format_string(
            f"JSON escape %s of a lone surrogate (no Unicode character) at byte %d of {where}",
            found["escape"],
            found["at"],
        ),
    )


def lone_surrogate_in_key(key: Column) -> Column:
    """The reason a record's key holds a lone surrogate escape, when the key is JSON text
    (silver decodes its escapes; a plain-text key is kept as it is); null otherwise."""
    return lone_surrogate_reason(F.when(F.ltrim(key).rlike(r'^[\[{"]'), key), "the key")
