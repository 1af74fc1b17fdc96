"""Config loading: valid files become typed objects; bad ones name file, key, expectation."""

from __future__ import annotations

from pathlib import Path

import pytest

from pyspark_jobs.config import ConfigError, load_config
from pyspark_jobs.settings import PROJECT_ROOT

GOOD = """
sources:
  - name: orders
    format: debezium
    landing: data/orders
    entities:
      - name: shop.orders
        table: orders
        key: [id]
        columns: {id: bigint, amount: "decimal(10, 2)", note: string}
        soft_delete: true
  - name: stream
    format: cassandra
    kafka:
      bootstrap_servers: ${BROKERS}
      topics: [a, b]
      options: {kafka.sasl.jaas.config: "${JAAS}"}
    entities:
      - {name: ks.t, table: t, key: [k], columns: {k: string}}
"""


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "config" / "sources.yml"
    path.parent.mkdir(exist_ok=True)
    path.write_text(text)
    return path


def test_good_config_loads_typed(tmp_path: Path):
    config = load_config(write(tmp_path, GOOD), {"BROKERS": "127.0.0.1:9092", "JAAS": "secret"})
    orders = config.source("orders")
    assert orders.landing == tmp_path / "data" / "orders"
    assert orders.entities[0].columns == {
        "id": "bigint",
        "amount": "decimal(10, 2)",
        "note": "string",
    }
    assert orders.entities[0].value_columns == ("amount", "note")
    assert orders.entities[0].soft_delete is True
    kafka = config.source("stream").kafka
    assert kafka is not None
    assert (kafka.bootstrap_servers, kafka.topics) == ("127.0.0.1:9092", ("a", "b"))
    assert kafka.options == {"kafka.sasl.jaas.config": "secret"}
    assert config.quarantine_rate_max == 0.01


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (("format: debezium", "format: mysql"), "sources[orders].format: expected one of debezium"),
        (
            ("key: [id]", "key: [nope]"),
            "sources[orders].entities[0].key: expected key column 'nope'",
        ),
        (('amount: "decimal(10, 2)"', "amount: money"), "columns.amount: expected a type among"),
        (("table: orders", "table: 'drop table x'"), "entities[0].table: expected an identifier"),
        (
            ("landing: data/orders", "kafka: {bootstrap_servers: x, topics: [a]}\n    landing: d"),
            "sources[orders]: expected exactly one of landing",
        ),
        (("name: stream", "name: orders"), "sources: expected unique source names"),
        (
            ("${BROKERS}", "${MISSING_VAR}"),
            "bootstrap_servers: expected environment variable MISSING_VAR",
        ),
    ],
)
def test_bad_config_names_file_key_and_expectation(tmp_path: Path, change, message):
    path = write(tmp_path, GOOD.replace(*change))
    with pytest.raises(ConfigError) as error:
        load_config(path, {"BROKERS": "b", "JAAS": "j"})
    assert str(error.value).startswith(f"{path}: ")
    assert message in str(error.value)


def test_missing_and_unparsable_files(tmp_path: Path):
    with pytest.raises(ConfigError, match="config file not found"):
        load_config(tmp_path / "nope.yml")
    with pytest.raises(ConfigError, match="not valid YAML"):
        load_config(write(tmp_path, "sources: [unclosed"))


def test_committed_config_is_valid():
    config = load_config(PROJECT_ROOT / "config" / "sources.yml")
    assert {s.format for s in config.sources} >= {"debezium", "cassandra"}
    for source in config.sources:
        assert source.landing is not None and source.landing.is_dir(), source.name


GRAPH = """
sources:
  - name: graph
    format: tigergraph
    landing: data/graph
    entities:
      - name: Person
        table: person
        kind: vertex
        key: [uid]
        columns: {uid: string, age: bigint, score: double, ok: boolean, born: timestamp, tags: json}
        defaults: {age: 18, score: 0.5, ok: true, born: "2000-01-01 00:00:00", tags: {}}
"""


def test_tigergraph_defaults_load_as_value_text(tmp_path: Path):
    person = load_config(write(tmp_path, GRAPH)).source("graph").entity("Person")
    assert person.defaults == {
        "age": "18",
        "score": "0.5",
        "ok": "true",
        "born": "2000-01-01 00:00:00",
        "tags": "{}",
    }


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (("age: 18,", "age: old,"), "entities[0].defaults.age: expected a bigint value, got 'old'"),
        (("ok: true", "ok: 1"), "defaults.ok: expected a boolean value, got 1"),
        (('born: "2000-01-01 00:00:00"', "born: soon"), "defaults.born: expected a timestamp"),
        (("tags: {}", "tags: x"), "defaults.tags: expected a json value"),
        (("{age: 18,", "{uid: x, age: 18,"), "defaults.uid: expected a declared column that is"),
        (("kind: vertex", "kind: row"), "defaults: expected no defaults: they apply to vertex"),
    ],
)
def test_bad_defaults_name_the_column_and_type(tmp_path: Path, change, message):
    path = write(tmp_path, GRAPH.replace(*change))
    with pytest.raises(ConfigError) as error:
        load_config(path)
    assert str(error.value).startswith(f"{path}: ")
    assert message in str(error.value)


# Config abuse: names that would be SQL if pasted into a statement, paths that leave the
# repo, keys nobody reads, values of the wrong type. Each is one line naming file and key.
@pytest.mark.parametrize(
    ("change", "message"),
    [
        # identifiers: table and column names become SQL identifiers (quoted, but only
        # after this check); a trailing newline is not an identifier either
        (("table: orders", "table: 'or`ders'"), "entities[0].table: expected an identifier"),
        (("table: orders", 'table: "orders; drop"'), "entities[0].table: expected an identifier"),
        (("table: orders", 'table: "orders\'"'), "entities[0].table: expected an identifier"),
        (("table: orders", 'table: "orders\\n"'), "entities[0].table: expected an identifier"),
        (("{id: bigint,", '{"i`d": bigint, id: bigint,'), "entities[0].columns: expected an ident"),
        (("{id: bigint,", '{"id;--": bigint, id: bigint,'), "entities[0].columns: expected an"),
        (("{id: bigint,", '{"i\\"d": bigint, id: bigint,'), "entities[0].columns: expected an ide"),
        (("name: orders", "name: 'ord;ers'"), "sources[0].name: expected an identifier"),
        # entity names are data, never SQL, but have no use for these characters either
        (("name: shop.orders", "name: 'shop.`orders`'"), "entities[0].name: expected an entity"),
        (("name: shop.orders", 'name: "shop.orders\'"'), "entities[0].name: expected an entity"),
        (("name: shop.orders", "name: 'shop;orders'"), "entities[0].name: expected an entity"),
        # names Spark or gold would read as the same column or table
        (
            ("{id: bigint,", "{id: bigint, ID: string,"),
            "columns.ID: expected names unique ignoring",
        ),
        (("{id: bigint,", "{id: bigint, _seq: string,"), "columns._seq: expected a name gold does"),
        (("key: [id]", "key: [id, id]"), "entities[0].key: expected each key column once"),
        (("table: t,", "table: ORDERS,"), "expected unique gold table names, 'ORDERS' is also"),
        # paths
        (
            ("landing: data/orders", "landing: ../../outside"),
            "sources[orders].landing: expected a folder inside the repo or an absolute path, "
            "without '..', got '../../outside'",
        ),
        (("landing: data/orders", "landing: /srv/../etc"), "sources[orders].landing: expected"),
        # unknown keys, at every level
        (("sources:", "sink: x\nsources:"), "sink: expected one of gold, quality, sources"),
        (("landing: data/orders", "landig: data/orders"), "sources[orders].landig: expected one"),
        (("soft_delete: true", "histroy: true"), "entities[0].histroy: expected one of"),
        (("topics: [a, b]", "topics: [a, b]\n      topicz: [c]"), "kafka.topicz: expected one"),
        (("sources:", "quality: {quarantine_rate: 0.5}\nsources:"), "quality.quarantine_rate: "),
        (("sources:", "gold: {retention: 3}\nsources:"), "gold.retention: expected one of"),
        # wrong types
        (("soft_delete: true", "soft_delete: 'yes'"), "entities[0].soft_delete: expected true or"),
        (("soft_delete: true", "history: 1"), "entities[0].history: expected true or false"),
        (("key: [id]", "key: id"), "entities[0].key: expected a non-empty list of key columns"),
        (
            ('columns: {id: bigint, amount: "decimal(10, 2)", note: string}', "columns: [id]"),
            "entities[0].columns: expected a mapping",
        ),
        (("note: string}", "note: 5}"), "entities[0].columns.note: expected a type name, got 5"),
        (("topics: [a, b]", "topics: a"), "kafka.topics: expected a list of topic names"),
        (("{kafka.sasl", "{x: [1], kafka.sasl"), "kafka.options.x: expected a string, number or"),
        (("sources:", "quality: {quarantine_rate_max: '1%'}\nsources:"), "quality.quarantine_rat"),
        (("sources:", "gold: {tombstone_retention_days: 1.5}\nsources:"), "tombstone_retention_da"),
        (("sources:", "gold: [1]\nsources:"), "gold: expected a mapping"),
        (("sources:", "quality: {data_docs_results_kept: 0}\nsources:"), "kept: expected a wh"),
        (("sources:", "quality: {run_summaries_kept: 2.5}\nsources:"), "kept: expected a who"),
        # a key given twice: YAML would silently keep the last one
        (("table: orders", "table: orders\n        table: users"), "line 9: table: expected each"),
    ],
)
def test_config_abuse_is_one_line_naming_file_and_key(tmp_path: Path, change, message):
    text = GOOD.replace(*change)
    assert text != GOOD, change
    path = write(tmp_path, text)
    with pytest.raises(ConfigError) as error:
        load_config(path, {"BROKERS": "b", "JAAS": "j"})
    assert str(error.value).startswith(f"{path}: ")
    assert message in str(error.value)
    assert "\n" not in str(error.value)


def test_absolute_and_plain_relative_landing_folders_still_load(tmp_path: Path):
    config = load_config(
        write(tmp_path, GOOD.replace("landing: data/orders", f"landing: {tmp_path / 'in'}")),
        {"BROKERS": "b", "JAAS": "j"},
    )
    assert config.source("orders").landing == tmp_path / "in"
    spaced = GOOD.replace("name: shop.orders", "name: dbo.Order Details$1")
    entity = load_config(write(tmp_path, spaced), {"BROKERS": "b", "JAAS": "j"}).sources[0]
    assert entity.entities[0].name == "dbo.Order Details$1"
