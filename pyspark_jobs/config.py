"""Load and validate ``config/sources.yml`` into frozen, typed objects.

Every problem is reported as one line naming the file, the key and what was expected,
so a scheduler's log says exactly what to fix.
"""

from __future__ import annotations

import datetime
import json
import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

FORMATS = (
    "debezium",
    "db2",
    "goldengate",
    "opencdc",
    "cassandra",
    "tigergraph",
    "debezium_patch",
    "pr_update",
)
ENTITY_KINDS = ("row", "vertex", "edge", "document")
# Types a declared column may have: Spark SQL's primitive names, decimals, and JSON text for
# nested values (lists, maps, documents) that gold keeps as a JSON string.
_SIMPLE_TYPES = {
    "string",
    "boolean",
    "int",
    "bigint",
    "smallint",
    "tinyint",
    "float",
    "double",
    "date",
    "timestamp",
    "json",
}
_DECIMAL = re.compile(r"^decimal\(\s*\d+\s*,\s*\d+\s*\)$")
_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
# Entity names are matched against message content and never become SQL; still, none of
# them needs a quote, backtick, semicolon, backslash or control character, so refuse those.
_ENTITY_NAME = re.compile(r"(?!\s)[^`'\";\\\x00-\x1f\x7f]+(?<!\s)")
# Gold adds these columns to every table (``gold/tables.py``, ``gold/scd2_history.py``).
_RESERVED_COLUMNS = (
    "_record_key",
    "_seq",
    "_change_id",
    "_source",
    "_event_ts",
    "_updated_at",
    "_cell_ts",
    "_deleted",
    "_deleted_at",
)
_HISTORY_COLUMNS = ("valid_from", "valid_to", "is_current")
_STARTING_OFFSETS = ("earliest", "latest")


class ConfigError(ValueError):
    """A sources file that cannot be used; the message names file, key and expectation."""


@dataclass(frozen=True)
class KafkaLocation:
    """Where a source's Kafka records come from."""

    bootstrap_servers: str
    topics: tuple[str, ...] = ()
    topic_pattern: str | None = None
    starting_offsets: str = "earliest"
    options: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Entity:
    """One table, vertex type, edge type or collection of a source and its gold table."""

    name: str
    table: str
    key: tuple[str, ...]
    columns: Mapping[str, str]
    kind: str = "row"
    soft_delete: bool = False
    history: bool = False
    # Declared default per value column (value text as silver writes it); TigerGraph
    # vertices and edges only, where every attribute always has a value.
    defaults: Mapping[str, str] = field(default_factory=dict)

    @property
    def value_columns(self) -> tuple[str, ...]:
        return tuple(c for c in self.columns if c not in self.key)


@dataclass(frozen=True)
class Source:
    """A CDC stream: its format, where its records land, and the entities it carries."""

    name: str
    format: str
    entities: tuple[Entity, ...]
    landing: Path | None = None
    kafka: KafkaLocation | None = None

    def entity(self, name: str) -> Entity:
        for entity in self.entities:
            if entity.name == name:
                return entity
        raise KeyError(f"source {self.name!r} declares no entity {name!r}")


@dataclass(frozen=True)
class LakehouseConfig:
    """All sources of one deployment."""

    path: Path
    sources: tuple[Source, ...]
    quarantine_rate_max: float = 0.01
    reject_rate_max: float = 0.01
    tombstone_retention_days: int = 30
    # Validation results (and their Data Docs pages) each gate keeps: every validation
    # stores one, and a gate's Data Docs cost grows with how many are kept.
    data_docs_results_kept: int = 100
    # Run summaries kept (<lake>/_state/runs): a continuous run writes one a cycle.
    run_summaries_kept: int = 1000

    def source(self, name: str) -> Source:
        for source in self.sources:
            if source.name == name:
                return source
        known = ", ".join(s.name for s in self.sources)
        raise ConfigError(f"{self.path}: no source named {name!r} (known: {known})")

    def tables(self) -> list[tuple[Source, Entity]]:
        """Every (source, entity) pair, in file order."""
        return [(s, e) for s in self.sources for e in s.entities]


def load_config(path: str | Path, environ: Mapping[str, str] | None = None) -> LakehouseConfig:
    """Read and validate a sources file.

    Relative landing paths resolve against the file's folder's parent (the repo root for
    ``config/sources.yml``). ``${VAR}`` in Kafka settings is read from ``environ``, so
    secrets never sit in committed files.

    >>> load_config("config/sources.yml").source("shop_debezium").format  # doctest: +SKIP
    'debezium'
    """
    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"{path}: config file not found")
    try:
        # _StrictLoader is a SafeLoader: no arbitrary Python objects.
        raw = yaml.load(path.read_text(), Loader=_StrictLoader)
    except _DuplicateKey as exc:
        raise ConfigError(f"{path}: {exc}") from None
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path}: not valid YAML: {exc}".replace("\n", " ")) from exc
    return _Parser(path, os.environ if environ is None else environ).config(raw)


class _DuplicateKey(ValueError):
    """A mapping of the YAML file names one key twice."""


class _StrictLoader(yaml.SafeLoader):
    """PyYAML's safe loader, refusing a key given twice in one mapping (it would keep the
    last one silently: a second ``table:`` would quietly win)."""


def _mapping_without_duplicates(
    loader: _StrictLoader, node: yaml.MappingNode, deep: bool = False
) -> dict[Any, Any]:
    seen: set[Any] = set()
    for key_node, _ in node.value:
        key = loader.construct_object(key_node, deep=True)
        try:
            twice = key in seen
            seen.add(key)
        except TypeError:  # an unhashable key: construct_mapping reports it
            continue
        if twice:
            line = key_node.start_mark.line + 1
            raise _DuplicateKey(f"line {line}: {key}: expected each key once in a mapping")
    return loader.construct_mapping(node, deep)


_StrictLoader.add_constructor(
    yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG,
    _mapping_without_duplicates,
)


class _Parser:
    def __init__(self, path: Path, environ: Mapping[str, str]) -> None:
        self.path = path
        self.environ = environ
        self.base = path.resolve().parent.parent

    def fail(self, key: str, expected: str) -> ConfigError:
        return ConfigError(f"{self.path}: {key}: expected {expected}")

    def mapping(self, value: Any, key: str) -> Mapping[str, Any]:
        if not isinstance(value, Mapping):
            raise self.fail(key, "a mapping")
        return value

    def text(self, value: Any, key: str, pattern: re.Pattern[str] | None = None) -> str:
        if not isinstance(value, str) or not value:
            raise self.fail(key, "a non-empty string")
        if pattern is not None and not pattern.fullmatch(value):
            raise self.fail(key, f"an identifier matching {pattern.pattern}, got {value!r}")
        return value

    def known_keys(self, raw: Mapping[str, Any], where: str, allowed: set[str]) -> None:
        unknown = sorted(str(k) for k in set(raw) - allowed)
        if unknown:
            raise self.fail(f"{where}.{unknown[0]}", f"one of {', '.join(sorted(allowed))}")

    def folder(self, value: Any, key: str) -> Path:
        """A landing folder: relative to the repo (``base``) or absolute, never through
        ``..`` (a relative one could leave the repo, an absolute one needs none)."""
        text = self.text(value, key)
        if ".." in Path(text).parts:
            raise self.fail(
                key, f"a folder inside the repo or an absolute path, without '..', got {text!r}"
            )
        return self.base / text

    def flag(self, value: Any, key: str) -> bool:
        if not isinstance(value, bool):
            raise self.fail(key, "true or false")
        return value

    def number(self, value: Any, key: str, low: float, high: float) -> float:
        if (
            isinstance(value, bool)
            or not isinstance(value, (int, float))
            or not low <= value <= high
        ):
            raise self.fail(key, f"a number from {low} to {high}")
        return float(value)

    def whole_number(self, value: Any, key: str, low: int, high: int) -> int:
        if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
            raise self.fail(key, f"a whole number from {low} to {high}")
        return value

    def expand(self, value: str, key: str) -> str:
        def lookup(match: re.Match[str]) -> str:
            name = match.group(1)
            if name not in self.environ:
                raise self.fail(key, f"environment variable {name} to be set")
            return self.environ[name]

        return re.sub(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}", lookup, value)

    def config(self, raw: Any) -> LakehouseConfig:
        top = self.mapping(raw, "(top level)")
        unknown = sorted(str(k) for k in set(top) - {"sources", "quality", "gold"})
        if unknown:
            raise self.fail(unknown[0], "one of gold, quality, sources")
        sources_raw = top.get("sources")
        if not isinstance(sources_raw, Sequence) or isinstance(sources_raw, str) or not sources_raw:
            raise self.fail("sources", "a non-empty list of sources")
        sources = tuple(self.source(s, f"sources[{i}]") for i, s in enumerate(sources_raw))
        names = [s.name for s in sources]
        for name in names:
            if names.count(name) > 1:
                raise self.fail("sources", f"unique source names, {name!r} appears twice")
        # The metastore folds case: `Users` and `users` are one table; a history table
        # `<table>_history` takes a name too.
        tables = [
            (name, s.name)
            for s in sources
            for e in s.entities
            for name in (e.table, *([f"{e.table}_history"] if e.history else []))
        ]
        seen: dict[str, str] = {}
        for table, source in tables:
            if table.lower() in seen:
                raise self.fail(
                    f"sources[{source}].entities",
                    f"unique gold table names, {table!r} is also used by {seen[table.lower()]!r}",
                )
            seen[table.lower()] = source
        quality = self.mapping(top.get("quality", {}), "quality")
        self.known_keys(
            quality,
            "quality",
            {
                "quarantine_rate_max",
                "reject_rate_max",
                "data_docs_results_kept",
                "run_summaries_kept",
            },
        )
        gold = self.mapping(top.get("gold", {}), "gold")
        self.known_keys(gold, "gold", {"tombstone_retention_days"})
        sections = {"quality": quality, "gold": gold}

        def given(key: str) -> Any:
            # The file's value of "section.name", else the dataclass's default.
            section, name = key.split(".")
            return sections[section].get(name, getattr(LakehouseConfig, name))

        def number(key: str, low: float, high: float) -> float:
            return self.number(given(key), key, low, high)

        def whole_number(key: str, low: int, high: int) -> int:
            return self.whole_number(given(key), key, low, high)

        return LakehouseConfig(
            path=self.path,
            sources=sources,
            quarantine_rate_max=number("quality.quarantine_rate_max", 0, 1),
            reject_rate_max=number("quality.reject_rate_max", 0, 1),
            tombstone_retention_days=whole_number("gold.tombstone_retention_days", 0, 36500),
            data_docs_results_kept=whole_number("quality.data_docs_results_kept", 1, 1_000_000),
            run_summaries_kept=whole_number("quality.run_summaries_kept", 1, 1_000_000),
        )

    def source(self, raw: Any, where: str) -> Source:
        src = self.mapping(raw, where)
        name = self.text(src.get("name"), f"{where}.name", _IDENTIFIER)
        where = f"sources[{name}]"
        self.known_keys(src, where, {"name", "format", "landing", "kafka", "entities"})
        fmt = src.get("format")
        if fmt not in FORMATS:
            raise self.fail(f"{where}.format", f"one of {', '.join(FORMATS)}, got {fmt!r}")
        landing = None
        if "landing" in src:
            landing = self.folder(src["landing"], f"{where}.landing")
        kafka = self.kafka(src["kafka"], f"{where}.kafka") if "kafka" in src else None
        if (landing is None) == (kafka is None):
            raise self.fail(where, "exactly one of landing (a folder) or kafka")
        entities_raw = src.get("entities")
        if (
            not isinstance(entities_raw, Sequence)
            or isinstance(entities_raw, str)
            or not entities_raw
        ):
            raise self.fail(f"{where}.entities", "a non-empty list of entities")
        entities = tuple(
            self.entity(e, f"{where}.entities[{i}]") for i, e in enumerate(entities_raw)
        )
        entity_names = [e.name for e in entities]
        for entity_name in entity_names:
            if entity_names.count(entity_name) > 1:
                # Silver joins changes to the declared entity by name: twice would double them.
                raise self.fail(
                    f"{where}.entities", f"unique entity names, {entity_name!r} appears twice"
                )
        return Source(name=name, format=fmt, entities=entities, landing=landing, kafka=kafka)

    def kafka(self, raw: Any, where: str) -> KafkaLocation:
        kafka = self.mapping(raw, where)
        self.known_keys(
            kafka,
            where,
            {"bootstrap_servers", "topics", "topic_pattern", "starting_offsets", "options"},
        )
        servers = self.expand(
            self.text(kafka.get("bootstrap_servers"), f"{where}.bootstrap_servers"),
            f"{where}.bootstrap_servers",
        )
        topics = kafka.get("topics", [])
        if not isinstance(topics, Sequence) or isinstance(topics, str):
            raise self.fail(f"{where}.topics", "a list of topic names")
        pattern = kafka.get("topic_pattern")
        if bool(topics) == (pattern is not None):
            raise self.fail(where, "exactly one of topics (a list) or topic_pattern")
        offsets = kafka.get("starting_offsets", "earliest")
        if offsets not in _STARTING_OFFSETS and not (
            isinstance(offsets, str) and offsets.startswith("{")
        ):
            raise self.fail(f"{where}.starting_offsets", "earliest, latest or a JSON offsets spec")
        options = self.mapping(kafka.get("options", {}), f"{where}.options")
        for k, v in options.items():
            if not isinstance(v, (str, int, float, bool)):
                raise self.fail(f"{where}.options.{k}", "a string, number or boolean")
        return KafkaLocation(
            bootstrap_servers=servers,
            topics=tuple(self.text(t, f"{where}.topics") for t in topics),
            topic_pattern=self.text(pattern, f"{where}.topic_pattern") if pattern else None,
            starting_offsets=offsets,
            options={
                str(k): self.expand(str(v), f"{where}.options.{k}") for k, v in options.items()
            },
        )

    def entity(self, raw: Any, where: str) -> Entity:
        ent = self.mapping(raw, where)
        self.known_keys(
            ent,
            where,
            {"name", "table", "key", "columns", "kind", "soft_delete", "history", "defaults"},
        )
        name = self.text(ent.get("name"), f"{where}.name")
        if not _ENTITY_NAME.fullmatch(name):
            raise self.fail(
                f"{where}.name",
                "an entity name without quotes, backticks, semicolons, backslashes, control "
                f"characters or surrounding spaces, got {name!r}",
            )
        history = self.flag(ent.get("history", False), f"{where}.history")
        table = self.text(ent.get("table"), f"{where}.table", _IDENTIFIER)
        columns_raw = self.mapping(ent.get("columns"), f"{where}.columns")
        if not columns_raw:
            raise self.fail(f"{where}.columns", "at least one column")
        columns: dict[str, str] = {}
        reserved = {*_RESERVED_COLUMNS, *(_HISTORY_COLUMNS if history else ())}
        for col, typ in columns_raw.items():
            self.text(col, f"{where}.columns", _IDENTIFIER)
            # Spark's column names ignore case.
            if col.lower() in reserved:
                raise self.fail(f"{where}.columns.{col}", "a name gold does not use itself")
            same = [c for c in columns if c.lower() == col.lower()]
            if same:
                raise self.fail(
                    f"{where}.columns.{col}", f"names unique ignoring case, {same[0]!r} is declared"
                )
            if not isinstance(typ, str):
                raise self.fail(f"{where}.columns.{col}", f"a type name, got {typ!r}")
            typ = typ.strip().lower()
            if typ not in _SIMPLE_TYPES and not _DECIMAL.match(typ):
                raise self.fail(
                    f"{where}.columns.{col}",
                    f"a type among {', '.join(sorted(_SIMPLE_TYPES))} or decimal(p,s), got {typ!r}",
                )
            columns[col] = typ
        key_raw = ent.get("key")
        if not isinstance(key_raw, Sequence) or isinstance(key_raw, str) or not key_raw:
            raise self.fail(f"{where}.key", "a non-empty list of key columns")
        key = tuple(self.text(k, f"{where}.key") for k in key_raw)
        for k in key:
            if k not in columns:
                raise self.fail(f"{where}.key", f"key column {k!r} to be declared in columns")
            if key.count(k) > 1:
                raise self.fail(f"{where}.key", f"each key column once, {k!r} appears twice")
        kind = ent.get("kind", "row")
        if kind not in ENTITY_KINDS:
            raise self.fail(f"{where}.kind", f"one of {', '.join(ENTITY_KINDS)}, got {kind!r}")
        defaults = self.defaults(ent.get("defaults"), f"{where}.defaults", kind, columns, key)
        return Entity(
            name=name,
            table=table,
            key=key,
            columns=columns,
            kind=kind,
            soft_delete=self.flag(ent.get("soft_delete", False), f"{where}.soft_delete"),
            history=history,
            defaults=defaults,
        )

    def defaults(
        self,
        raw: Any,
        where: str,
        kind: str,
        columns: Mapping[str, str],
        key: tuple[str, ...],
    ) -> dict[str, str]:
        """``column -> default value text``, each checked against the column's type."""
        if raw is None:
            return {}
        if kind not in ("vertex", "edge"):
            raise self.fail(where, "no defaults: they apply to vertex and edge entities only")
        out: dict[str, str] = {}
        for col, value in self.mapping(raw, where).items():
            if col not in columns or col in key:
                raise self.fail(f"{where}.{col}", "a declared column that is not a key column")
            text = default_text(value, columns[col])
            if text is None:
                raise self.fail(f"{where}.{col}", f"a {columns[col]} value, got {value!r}")
            out[col] = text
        return out


_INTEGER_TYPES = ("int", "bigint", "smallint", "tinyint")


def default_text(value: Any, declared: str) -> str | None:
    """A YAML default as silver's value text (strings unquoted, the rest as JSON), or
    None when it is not a value of the declared type.

    >>> default_text(5, "bigint"), default_text({"a": 1}, "json")
    ('5', '{"a":1}')
    """
    if declared in _INTEGER_TYPES:
        ok = isinstance(value, int) and not isinstance(value, bool)
    elif declared in ("float", "double") or _DECIMAL.match(declared):
        ok = isinstance(value, (int, float)) and not isinstance(value, bool)
    elif declared == "boolean":
        ok = isinstance(value, bool)
    elif declared == "json":
        return json.dumps(value, separators=(",", ":")) if isinstance(value, (list, dict)) else None
    elif declared in ("timestamp", "date"):
        ok = isinstance(value, (str, datetime.date))
        value = value.isoformat(sep=" ") if isinstance(value, datetime.datetime) else value
        value = value.isoformat() if isinstance(value, datetime.date) else value
        if ok and isinstance(value, str):
            try:
                datetime.datetime.fromisoformat(value)
            except ValueError:
                ok = False
    else:
        ok = isinstance(value, str)
    if not ok:
        return None
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)
