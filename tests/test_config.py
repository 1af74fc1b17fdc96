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
