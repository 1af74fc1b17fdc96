"""The dbt source `gold` (models/marts/_gold__sources.yml) declares exactly the gold tables
of the samples' config, each with its source, entity and key, a key test and the update
time dbt's freshness reads; the project builds the marts outside the pipeline's models."""

from __future__ import annotations

import yaml

from pyspark_jobs.config import load_config
from pyspark_jobs.gold.tables import METADATA_COLUMNS
from pyspark_jobs.settings import DEFAULT_CONFIG, PROJECT_ROOT

GOLD_SOURCES = PROJECT_ROOT / "models" / "marts" / "_gold__sources.yml"


def gold_source() -> dict:
    (gold,) = [
        s for s in yaml.safe_load(GOLD_SOURCES.read_text())["sources"] if s["name"] == "gold"
    ]
    return gold


def test_every_gold_table_of_the_config_is_declared_with_its_source_entity_and_key():
    tables = {t["name"]: t for t in gold_source()["tables"]}
    config = load_config(DEFAULT_CONFIG)

    assert {name: t["config"]["meta"] for name, t in tables.items()} == {
        entity.table: {"lakehouse_source": source.name, "entity": entity.name, "key": [*entity.key]}
        for source, entity in config.tables()
    }
    for name, table in tables.items():
        columns = {c["name"]: c for c in table["columns"]}
        assert columns["_record_key"]["data_tests"] == ["unique", "not_null"], name
        assert table["description"] and columns["_updated_at"]["description"], name


def test_freshness_reads_gold_metadata_and_the_lineage_names_the_gold_step():
    gold = gold_source()
    assert gold["schema"] == "gold"
    assert gold["config"]["loaded_at_field"] == "_updated_at"
    assert dict(METADATA_COLUMNS)["_updated_at"] == "timestamp"
    assert "gold_apply" in gold["config"]["meta"]["produced_by"]
    exposures = yaml.safe_load(GOLD_SOURCES.read_text())["exposures"]
    assert [(e["name"], e["depends_on"]) for e in exposures] == [
        ("gold_apply", ["ref('change_log')"])
    ]


def test_the_pipeline_builds_the_tagged_models_and_not_the_marts():
    project = yaml.safe_load((PROJECT_ROOT / "dbt_project.yml").read_text())
    folders = {k: v for k, v in project["models"]["cdc_lakehouse"].items() if isinstance(v, dict)}
    assert {f for f, c in folders.items() if "pipeline" in c.get("+tags", [])} == {
        "staging",
        "intermediate",
        "silver",
    }
    assert "+tags" not in folders["marts"]
