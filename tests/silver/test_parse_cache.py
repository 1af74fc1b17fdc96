"""dbt's parse, saved per set of vars and reused by a later build in any lake
(pyspark_jobs/silver/parse_cache.py). dbt itself decides whether a saved parse fits: these
tests read its log to see which parse it did. ``dbt parse`` needs no Spark session."""

from __future__ import annotations

import json
import os
from dataclasses import replace
from pathlib import Path

import pytest

from pyspark_jobs.settings import DEFAULT_CONFIG, Settings
from pyspark_jobs.silver import parse_cache
from pyspark_jobs.silver.dbt_runner import run_dbt

FULL_PARSE = "Unable to do partial parsing"
REUSED = "Partial parsing enabled"


def vars_args(**variables: object) -> list[str]:
    return ["--vars", json.dumps(variables)]


def test_the_key_is_the_vars_as_dbt_compares_them_and_the_target() -> None:
    one = parse_cache.parse_key(["build", *vars_args(a=1, b=[2, 3])], "local")
    assert one == parse_cache.parse_key(["build", "--vars", '{"b": [2, 3], "a": 1}'], "local")
    # The command and its selection are not part of dbt's check: only vars and target.
    assert one == parse_cache.parse_key(["parse", *vars_args(a=1, b=[2, 3])], "local")
    assert one != parse_cache.parse_key(["build", *vars_args(a=1, b=[3, 2])], "local")
    assert one != parse_cache.parse_key(["build", *vars_args(a=1, b=[2, 3])], "thrift")
    assert parse_cache.parse_key(["build"], "local") == parse_cache.parse_key(
        ["build", *vars_args()], "local"
    )


def test_keep_saves_restore_puts_back_and_only_the_newest_are_kept(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cache, target = tmp_path / "cache", tmp_path / "lake" / "target"
    assert not parse_cache.restore(target, "k0", cache)
    parse_cache.keep(target, "k0", cache)  # dbt left no parse: nothing saved, no error
    assert not cache.exists() or not list(cache.iterdir())

    monkeypatch.setattr(parse_cache, "KEEP", 2)
    for number in range(3):
        target.mkdir(parents=True, exist_ok=True)
        (target / parse_cache.PARSE_FILE).write_bytes(f"parse {number}".encode())
        parse_cache.keep(target, f"k{number}", cache)
        os.utime(cache / f"k{number}.msgpack", (1_000 + number, 1_000 + number))
    assert sorted(p.name for p in cache.iterdir()) == ["k1.msgpack", "k2.msgpack"]

    other = tmp_path / "other" / "target"
    assert parse_cache.restore(other, "k1", cache)
    assert (other / parse_cache.PARSE_FILE).read_bytes() == b"parse 1"


def last_invocation(settings: Settings) -> str:
    """dbt's file log of the last command run on ``settings``' lake."""
    text = (settings.dbt_dir / "logs" / "dbt.log").read_text()
    return text.rsplit("running dbt with arguments", 1)[-1]


def test_a_new_lake_and_a_vars_switch_reuse_the_parse_dbt_accepts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # run_dbt points the profile at each lake; the session's lake comes back afterwards.
    monkeypatch.setenv("LAKEHOUSE_ROOT", os.environ.get("LAKEHOUSE_ROOT", str(tmp_path)))
    cache = tmp_path / "cache"
    base = Settings(lake_root=tmp_path / "a", master="local[1]", config_path=DEFAULT_CONFIG)
    lake_a, lake_b = base, replace(base, lake_root=tmp_path / "b")
    full = vars_args(cdc_formats=["debezium", "db2"], pipeline_build=True)
    batch = vars_args(cdc_formats=["debezium", "db2"], batch_formats=["db2"])

    run_dbt(lake_a, ["parse", *full], parse_cache_dir=cache)
    assert FULL_PARSE in last_invocation(lake_a)
    run_dbt(lake_a, ["parse", *batch], parse_cache_dir=cache)
    assert FULL_PARSE in last_invocation(lake_a)  # new vars: dbt parses again

    # A lake that never ran dbt, and a lake whose last build had other vars, both start
    # from the parse saved for these vars.
    run_dbt(lake_b, ["parse", *full], parse_cache_dir=cache)
    assert REUSED in last_invocation(lake_b) and FULL_PARSE not in last_invocation(lake_b)
    run_dbt(lake_a, ["parse", *full], parse_cache_dir=cache)
    assert REUSED in last_invocation(lake_a) and FULL_PARSE not in last_invocation(lake_a)
    manifest = json.loads((lake_a.dbt_dir / "target" / "manifest.json").read_text())
    keyed = manifest["nodes"]["model.cdc_lakehouse.int_change_log__keyed"]
    assert keyed["config"]["materialized"] == "view"  # as the full build's vars make it
    assert sorted(n for n in keyed["depends_on"]["nodes"] if n.startswith("model.")) == [
        "model.cdc_lakehouse.stg_cdc__db2",
        "model.cdc_lakehouse.stg_cdc__debezium",
    ]

    # A damaged saved parse costs a full parse, not the build, and is replaced.
    key = parse_cache.parse_key(batch, lake_a.dbt_target)
    (cache / f"{key}.msgpack").write_bytes(b"not a parse")
    lake_c = replace(base, lake_root=tmp_path / "c")
    run_dbt(lake_c, ["parse", *batch], parse_cache_dir=cache)
    log_c = last_invocation(lake_c)
    assert "Failed to load parsed file from disk" in log_c and REUSED not in log_c
    manifest = json.loads((lake_c.dbt_dir / "target" / "manifest.json").read_text())
    keyed = manifest["nodes"]["model.cdc_lakehouse.int_change_log__keyed"]
    assert keyed["config"]["materialized"] == "ephemeral"  # batch_formats inlines it
    assert (cache / f"{key}.msgpack").read_bytes() != b"not a parse"
    lake_d = replace(base, lake_root=tmp_path / "d")
    run_dbt(lake_d, ["parse", *batch], parse_cache_dir=cache)
    assert REUSED in last_invocation(lake_d)
