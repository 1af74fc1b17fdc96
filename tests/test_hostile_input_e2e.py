"""Hostile input through the whole pipeline: one run, every kind of bad or strange record
beside many valid Debezium records.

Each hostile line is quarantined in bronze, rejected in silver or gold with a reason naming
its fault, or applied faithfully (its strange but valid values byte-exact in gold). The bad
ones are rare (well under the default thresholds of 1%), so the run passes every gate and
exits 0. No gold table holds a NULL key or a key made of JSON text; nothing is written
outside the lake root; no message text is ever run as SQL.
"""

from __future__ import annotations

import base64
import hashlib
import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from pyspark_jobs.config import LakehouseConfig, load_config
from pyspark_jobs.pipeline import run_pipeline
from pyspark_jobs.settings import Settings
from tests.conftest import reset_lake
from tests.quality.support import latest_run

pytestmark = pytest.mark.slow

SOURCE = "hostile"
USERS_TOPIC = "shop.public.users"
HANDLES_TOPIC = "shop.public.handles"
VALID = 1500  # valid user records: the hostile ones stay well under 1% of a source
BIG = 123456789012345678901234567890  # beyond 64 bits
FIVE_MB = 5 * 1024 * 1024
DEEP = 10_000

CONFIG = {
    "sources": [
        {
            "name": SOURCE,
            "format": "debezium",
            "landing": None,  # set per test run
            "entities": [
                {
                    "name": "shop.users",
                    "table": "users",
                    "key": ["USER_ID"],
                    "columns": {"USER_ID": "bigint", "NAME": "string", "COINS": "bigint"},
                },
                {
                    "name": "shop.handles",
                    "table": "handles",
                    "key": ["handle"],
                    "columns": {"handle": "string", "bio": "string", "score": "double"},
                },
            ],
        }
    ]
}


# -- what each line must become ---------------------------------------------------------


@dataclass(frozen=True)
class Quarantined:
    reason: str


@dataclass(frozen=True)
class Rejected:
    """A silver reject (``silver.change_log_rejects``)."""

    reason: str


@dataclass(frozen=True)
class GoldRejected:
    """A net state gold would not merge (``lakehouse.gold_rejects``)."""

    table: str
    record_key: str
    reason: str


@dataclass(frozen=True)
class Applied:
    """The row gold holds for the key, byte for byte."""

    table: str
    row: tuple[Any, ...]


Outcome = Quarantined | Rejected | GoldRejected | Applied


@dataclass(frozen=True)
class Item:
    name: str
    line: bytes
    outcome: Outcome
    file: str = "hostile.jsonl"


def event(table: str, after: dict[str, Any] | None, lsn: int, op: str = "c") -> dict[str, Any]:
    """A Debezium change event of ``shop.<table>``."""
    return {
        "before": None,
        "after": after,
        "source": {"db": "shop", "table": table, "ts_ms": 1700000000000 + lsn, "lsn": lsn},
        "op": op,
        "ts_ms": 1700000000000 + lsn,
    }


def line(topic: str, offset: int, key: Any, value: Any) -> bytes:
    """A landing line as producers write it (value last), UTF-8 as is."""
    record = {
        "topic": topic,
        "partition": 0,
        "offset": offset,
        "timestamp": 1700000000000 + offset,
        "key": key,
        "value": value,
    }
    return json.dumps(record, separators=(",", ":"), ensure_ascii=False).encode()


def user_line(offset: int, after: dict[str, Any], key: Any = None) -> bytes:
    key = {"USER_ID": after["USER_ID"]} if key is None else key
    return line(USERS_TOPIC, offset, key, event("users", after, offset))


def handle_line(offset: int, handle: Any, bio: Any, topic: str = HANDLES_TOPIC) -> bytes:
    after = {"handle": handle, "bio": bio, "score": 1.5}
    return line(topic, offset, {"handle": handle}, event("handles", after, offset))


CONFIG_COLUMNS = ("handle", "bio", "score")


def handle_row(handle: str, bio: str) -> Applied:
    return Applied("gold.handles", (handle, bio, 1.5))


def hostile_items() -> list[Item]:
    """Every hostile line, each at its own Kafka offset (from 100000 on)."""
    items: list[Item] = []
    offset = iter(range(100_000, 200_000))

    def add(name: str, raw: bytes, outcome: Outcome, file: str = "hostile.jsonl") -> None:
        items.append(Item(name, raw, outcome, file))

    not_json = "not a JSON object (malformed, truncated or nested too deeply)"
    add("not JSON", b"this is not JSON {", Quarantined(not_json))
    whole = user_line(next(offset), {"USER_ID": 9001, "NAME": "cut", "COINS": 1})
    add("truncated JSON", whole[: len(whole) // 2], Quarantined(not_json))

    bad_utf8 = user_line(next(offset), {"USER_ID": 9002, "NAME": "caf#", "COINS": 1})
    at = bad_utf8.index(b"#")
    add(
        "invalid UTF-8 (a Latin-1 e-acute)",
        bad_utf8.replace(b"#", b"\xe9"),
        Quarantined(f"invalid UTF-8 at byte {at} of the line"),
    )
    raw_nul = user_line(next(offset), {"USER_ID": 9003, "NAME": "a#b", "COINS": 1})
    at = raw_nul.index(b"#")
    add(
        "a raw NUL byte",
        raw_nul.replace(b"#", b"\x00"),
        Quarantined(f"unescaped control character U+0000 at byte {at} of the line"),
    )
    deep = (
        b'{"topic":"shop.public.handles","partition":0,"offset":%d,"key":{"handle":"deep"},'
        b'"value":{"op":"c","after":{"handle":"deep","bio":%s},"source":{"db":"shop",'
        b'"table":"handles","lsn":1}}}' % (next(offset), b"[" * DEEP + b"]" * DEEP)
    )
    add("JSON nested 10,000 deep", deep, Quarantined(not_json))
    for literal in (b"NaN", b"Infinity", b"-Infinity"):
        numbers = user_line(next(offset), {"USER_ID": 9004, "NAME": "n", "COINS": 0})
        add(f"{literal.decode()} literal", numbers.replace(b'"COINS":0', b'"COINS":' + literal),
            Quarantined(not_json))  # fmt: skip
    twice = user_line(next(offset), {"USER_ID": 9005, "NAME": "twice", "COINS": 1})
    add(
        "duplicate top-level field",
        twice.replace(b'"partition":0,', b'"partition":0,"offset":1,'),
        Quarantined("duplicate field: offset"),
    )
    add("an empty line", b"", Quarantined(not_json))
    dup_after = user_line(next(offset), {"USER_ID": 9010, "NAME": "dup", "COINS": 1})
    add(
        "duplicate field in the after image",
        dup_after.replace(b'"NAME":"dup"', b'"NAME":"first","NAME":"second"'),
        Rejected("field named twice in the row image: NAME"),
    )
    # Deeper than the key's and the row image's own fields: a JSON column, the envelope.
    add(
        "duplicate field in a nested JSON value",
        handle_line(next(offset), "nested-twice", {"lang": "en"}).replace(
            b'"lang":"en"', b'"lang":"en","lang":"fr"'
        ),
        Rejected("field named twice inside the value"),
    )
    dup_source = user_line(next(offset), {"USER_ID": 9013, "NAME": "dupsource", "COINS": 1})
    add(
        "duplicate field in the Debezium source block",
        dup_source.replace(b'"db":"shop"', b'"db":"shop","db":"other"'),
        Rejected("field named twice inside the value"),
    )
    dup_key = user_line(next(offset), {"USER_ID": 9011, "NAME": "dupkey", "COINS": 1})
    add(
        "duplicate field in the Kafka key",
        dup_key.replace(b'"key":{"USER_ID":9011}', b'"key":{"USER_ID":9011,"USER_ID":9012}'),
        Rejected("field named twice in the key: USER_ID"),
    )

    # Valid JSON, not a valid message.
    add(
        "a number beyond 64 bits in a bigint key",
        user_line(next(offset), {"USER_ID": BIG, "NAME": "big", "COINS": 1}),
        Rejected(f'key column USER_ID is not a bigint: "{BIG}"'),
    )
    add(
        "a value that is a JSON string",
        line(USERS_TOPIC, next(offset), {"USER_ID": 9006}, json.dumps("just a string")),
        Rejected("value is not a JSON object"),
    )
    add(
        "a value that is a JSON array",
        line(USERS_TOPIC, next(offset), {"USER_ID": 9007}, [event("users", None, 1)]),
        Rejected("value is not a JSON object"),
    )
    add(
        "a key that is a JSON object",
        handle_line(next(offset), {"a": 1}, "nested"),
        Rejected('key column handle is a JSON object, not a string: {"a":1}'),
    )
    add(
        "a null key",
        handle_line(next(offset), None, "no key"),
        Rejected("key columns missing: handle"),
    )
    add(
        "a number beyond 64 bits in a bigint value",
        user_line(next(offset), {"USER_ID": 9008, "NAME": "rich", "COINS": BIG}),
        GoldRejected("users", '{"USER_ID":"9008"}', f'column COINS is not a bigint: "{BIG}"'),
    )

    # Valid but strange: applied byte for byte.
    strange_handles = [
        "1; drop table gold.users --",
        "' or 1=1 --",
        '"; drop table gold.handles; --',
        "`gold`.`users`",
        "😀 emoji 🚀 key",
        "שלום עולם",
        "مرحبا\u202ebackwards",  # with a right-to-left override
    ]
    for handle in strange_handles:
        bio = f"bio of {handle}: '); delete from gold.users; -- 👨‍👩‍👧 עברית"
        add(f"key {handle!r}", handle_line(next(offset), handle, bio), handle_row(handle, bio))
    add(  # a string key column takes any scalar: the digits, exactly
        "a numeric key beyond 64 bits in a string key column",
        handle_line(next(offset), BIG, "numeric handle"),
        handle_row(str(BIG), "numeric handle"),
    )
    add(
        "SQL in the topic",
        handle_line(next(offset), "topic", "x", topic="t'; drop table bronze.cdc_raw; --"),
        handle_row("topic", "x"),
    )
    add(
        "an escaped NUL",
        handle_line(next(offset), "escaped-nul", "a\x00b"),  # json.dumps writes \u0000
        handle_row("escaped-nul", "a\x00b"),
    )
    lone = handle_line(next(offset), "lone-surrogate", "a#b")
    at = lone.index(b"#")
    add(
        "a JSON escape of a lone surrogate",
        lone.replace(b"#", b"\\ud800"),
        Quarantined(
            "JSON escape \\ud800 of a lone surrogate (no Unicode character)"
            f" at byte {at} of the line"
        ),
    )
    add(
        "a JSON escape of a surrogate pair",
        handle_line(next(offset), "pair", "a#b").replace(b"#", b"\\ud83d\\ude00"),
        handle_row("pair", "a\U0001f600b"),
    )
    # JSON numbers Spark's parsers would change (they read a fraction or exponent as a double)
    for number, read_as in (
        ("12.345678901234567890123", "12.345678901234567"),
        ("1e400", '"Infinity"'),  # a JSON string
        ("-1E-400", "-0.0"),
    ):
        add(
            f"the number {number}",
            handle_line(next(offset), f"number {number}", "n").replace(
                b'"score":1.5', b'"score":' + number.encode()
            ),
            Rejected(f"number {number} cannot be kept exactly: Spark reads it as {read_as}"),
        )
    # ... but not one a double holds exactly, however it is spelled, nor digits in a string
    add(
        "a double spelled with zeros and an exponent",
        handle_line(next(offset), "spelled", "n").replace(b'"score":1.5', b'"score":0.150E+01'),
        handle_row("spelled", "n"),
    )
    add(
        "a long number inside a string",
        handle_line(next(offset), "in a string", '"12.345678901234567890123e400"'),
        handle_row("in a string", '"12.345678901234567890123e400"'),
    )
    big_bio = "5 MB: é😀ש " + "x" * FIVE_MB
    add(
        "a 5 MB value",
        handle_line(next(offset), "five-mb", big_bio),
        handle_row("five-mb", big_bio),
    )
    for handle in ("crlf-1", "crlf-2"):
        add(
            f"CRLF line ending ({handle})",
            handle_line(next(offset), handle, "ends in CR LF"),
            handle_row(handle, "ends in CR LF"),
            file="crlf.jsonl",
        )
    return items


def valid_lines() -> list[bytes]:
    return [
        user_line(offset, {"USER_ID": offset + 1, "NAME": f"user {offset + 1}", "COINS": offset})
        for offset in range(VALID)
    ]


# -- one run for the whole corpus ---------------------------------------------------------


def listing(root: Path, skip: Path) -> dict[str, str]:
    """Every file (its SHA-256) and folder ("") under ``root`` but ``skip``."""
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest() if p.is_file() else ""
        for p in root.rglob("*")
        if p != skip and skip not in p.parents
    }


@dataclass
class Run:
    code: int
    log: str
    items: list[Item]
    settings: Settings
    config: LakehouseConfig
    outside_before: dict[str, str]
    outside_after: dict[str, str]


@pytest.fixture(scope="module")
def run(
    spark: SparkSession, settings: Settings, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Run]:
    folder = tmp_path_factory.mktemp("hostile")
    landing = folder / "landing"
    landing.mkdir()
    items = hostile_items()
    valid = valid_lines()
    for n in range(3):  # valid records in three files, hostile lines in their own
        (landing / f"valid-{n}.jsonl").write_bytes(b"".join(v + b"\n" for v in valid[n::3]))
    by_file: dict[str, list[Item]] = {}
    for item in items:
        by_file.setdefault(item.file, []).append(item)
    for name, file_items in by_file.items():
        end = b"\r\n" if name == "crlf.jsonl" else b"\n"
        (landing / name).write_bytes(b"".join(i.line + end for i in file_items))
    (landing / "empty.jsonl").write_bytes(b"")
    raw = {**CONFIG, "sources": [{**CONFIG["sources"][0], "landing": str(landing)}]}
    config_path = folder / "config" / "sources.yml"
    config_path.parent.mkdir()
    config_path.write_text(yaml.safe_dump(raw, sort_keys=False, allow_unicode=True))
    config = load_config(config_path)

    reset_lake(spark, settings)
    lake = Path(settings.lake_root)
    outside = tmp_path_factory.getbasetemp()
    before = listing(outside, lake)
    lines: list[str] = []
    code = run_pipeline(spark, settings, config, log=lines.append)
    yield Run(code, "\n".join(lines), items, settings, config, before, listing(outside, lake))


def expected(items: list[Item], kind: type) -> list[Item]:
    return [i for i in items if isinstance(i.outcome, kind)]


def test_the_run_passes_every_gate_and_exits_0(run: Run):
    """Rare bad records are stopped where they are found; they do not stop the run."""
    assert run.code == 0, run.log
    summary = latest_run(run.settings)
    assert summary["status"] == "succeeded"
    assert {layer: gate["success"] for layer, gate in summary["gates"].items()} == {
        "bronze": True,
        "silver": True,
        "gold": True,
    }
    quarantined = len(expected(run.items, Quarantined))
    landed = VALID + len(run.items) - quarantined  # the empty file holds no line
    rejected = len(expected(run.items, Rejected))
    assert summary["layers"]["bronze"]["records"] == {SOURCE: landed}
    assert summary["layers"]["bronze"]["quarantined"] == {SOURCE: quarantined}
    assert summary["layers"]["silver"]["rejects"] == {SOURCE: rejected}
    observed = {
        e["column"]: e["values"][SOURCE]
        for layer in ("bronze", "silver")
        for e in summary["gates"][layer]["checkpoints"][0]["expectations"]
        if e["column"] in ("quarantine_rate", "reject_rate")
    }
    assert observed == pytest.approx(
        {
            "quarantine_rate": quarantined / (landed + quarantined),
            "reject_rate": rejected / landed,
        }
    )
    assert max(observed.values()) < run.config.quarantine_rate_max


def test_each_unreadable_line_is_quarantined_naming_its_fault(spark: SparkSession, run: Run):
    rows = spark.table("bronze.cdc_quarantine").where(F.col("source") == SOURCE)
    got = sorted((r["reason"], r["raw"]) for r in rows.select("reason", "raw").collect())
    want = []
    for item in expected(run.items, Quarantined):
        try:
            raw = item.line.decode("utf-8")
        except UnicodeDecodeError:  # no text: the exact bytes, as base64
            raw = base64.b64encode(item.line).decode()
        want.append((item.outcome.reason, raw))  # type: ignore[union-attr]
    assert got == sorted(want)


def test_each_invalid_message_is_rejected_in_silver_with_its_reason(spark: SparkSession, run: Run):
    rows = spark.table("silver.change_log_rejects").where(F.col("source") == SOURCE)
    got = sorted(
        (r["offset"], r["reject_reason"])
        for r in rows.select("lineage.offset", "reject_reason").collect()
    )
    want = sorted(
        (json.loads(i.line)["offset"], i.outcome.reason)  # type: ignore[union-attr]
        for i in expected(run.items, Rejected)
    )
    assert got == want


def test_a_value_gold_cannot_type_is_rejected_there_not_merged(spark: SparkSession, run: Run):
    rows = spark.table("lakehouse.gold_rejects").select("table_name", "record_key", "reason")
    assert sorted(tuple(r) for r in rows.collect()) == sorted(
        (o.table, o.record_key, o.reason)
        for o in (i.outcome for i in expected(run.items, GoldRejected))
        if isinstance(o, GoldRejected)
    )


def test_strange_but_valid_values_reach_gold_byte_exact(spark: SparkSession, run: Run):
    got = sorted(tuple(r) for r in spark.table("gold.handles").select(*CONFIG_COLUMNS).collect())
    want = sorted(i.outcome.row for i in expected(run.items, Applied))  # type: ignore[union-attr]
    assert len(got) == len(want)
    for g, w in zip(got, want, strict=True):  # one by one: a 5 MB mismatch stays readable
        assert g == w, (g[0], len(g[1]), w[0], len(w[1]))


def _tables(spark: SparkSession, database: str) -> list:
    """The database's tables, without the session's temporary views."""
    return [t for t in spark.sql(f"show tables in {database}").collect() if not t["isTemporary"]]


def test_valid_records_are_all_in_gold_and_no_message_ran_as_sql(spark: SparkSession, run: Run):
    users = spark.table("gold.users").select("USER_ID", "NAME", "COINS").collect()
    assert sorted(tuple(r) for r in users) == [
        (offset + 1, f"user {offset + 1}", offset) for offset in range(VALID)
    ]
    # Keys and topics held `drop table ...`: every table is still there, with its rows.
    # Not the session's temporary views (dbt's incremental `__dbt_tmp` views in this
    # shared session): SHOW TABLES lists them under every database.
    assert {t["tableName"] for t in _tables(spark, "gold")} == {
        "users",
        "handles",
    }
    assert spark.table("bronze.cdc_raw").count() == VALID + len(run.items) - len(
        expected(run.items, Quarantined)
    )


def test_no_gold_key_is_null_or_json_text(spark: SparkSession, run: Run):
    for _, entity in run.config.tables():
        table = spark.table(f"gold.{entity.table}")
        for row in table.select(*entity.key, "_record_key").collect():
            key = json.loads(row["_record_key"])
            assert list(key) == list(entity.key)
            for column in entity.key:
                assert row[column] is not None
                assert key[column] == str(row[column])
                assert not key[column].lstrip().startswith(("{", "[")), key


def test_nothing_is_written_outside_the_lake_root(spark: SparkSession, run: Run):
    assert run.outside_after == run.outside_before
    lake = str(run.settings.lake_root)
    for database in ("bronze", "silver", "gold", "lakehouse"):
        for table in _tables(spark, database):
            name = f"{database}.{table['tableName']}"
            detail = spark.sql(f"describe table extended {name}").where("col_name = 'Location'")
            location = detail.first()["data_type"]
            assert location.removeprefix("file:").startswith(lake), (name, location)
