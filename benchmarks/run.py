"""Time each layer of `lakehouse run` on generated data, in one Spark session.

make bench                       # default size
.venv/bin/python -m benchmarks.run --records 200000 --keys 20000
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import yaml

from benchmarks.generate import write_landing
from pyspark_jobs.config import load_config
from pyspark_jobs.pipeline import run_pipeline
from pyspark_jobs.session import get_spark
from pyspark_jobs.settings import Settings

CONFIG = {
    "quality": {"quarantine_rate_max": 0.01, "reject_rate_max": 0.01},
    "sources": [
        {
            "name": "bench_debezium",
            "format": "debezium",
            "landing": "landing/debezium",
            "entities": [
                {
                    "name": "shop.users",
                    "table": "users",
                    "key": ["USER_ID"],
                    "columns": {
                        "USER_ID": "bigint",
                        "TAX_CODE": "string",
                        "NAME": "string",
                        "COINS": "bigint",
                    },
                }
            ],
        },
        {
            "name": "bench_cassandra",
            "format": "cassandra",
            "landing": "landing/cassandra",
            "entities": [
                {
                    "name": "inventory.customers",
                    "table": "customers",
                    "key": ["id", "registration_date"],
                    "columns": {
                        "id": "bigint",
                        "registration_date": "bigint",
                        "first_name": "string",
                        "last_name": "string",
                        "email": "string",
                    },
                }
            ],
        },
    ],
}


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--records", type=int, default=100_000, help="records per source (default 100000)"
    )
    parser.add_argument(
        "--keys", type=int, default=10_000, help="distinct keys per source (default 10000)"
    )
    parser.add_argument("--dir", type=Path, help="work folder (default: a temporary one)")
    args = parser.parse_args()
    root = args.dir or Path(tempfile.mkdtemp(prefix="lakehouse-bench-"))
    (root / "config").mkdir(parents=True, exist_ok=True)
    config_path = root / "config" / "sources.yml"
    config_path.write_text(yaml.safe_dump(CONFIG, sort_keys=False))
    started = time.time()
    write_landing(root / "landing", args.records, args.keys)
    print(f"generated {2 * args.records} records in {time.time() - started:.1f} s under {root}")

    settings = Settings(
        lake_root=root / "lake", master="local[*]", config_path=config_path, shuffle_partitions=4
    )
    config = load_config(config_path)
    started = time.time()
    spark = get_spark(settings, app_name="cdc-lakehouse-bench")
    print(f"spark session: {time.time() - started:.1f} s")
    for label in ("first run (all records)", "second run (nothing new)"):
        started = time.time()
        code = run_pipeline(spark, settings, config, log=lambda _: None)
        total = time.time() - started
        summary = sorted((settings.state_dir / "runs").glob("*.json"))[-1]
        timings = yaml.safe_load(summary.read_text())["timings"]
        parts = ", ".join(f"{k} {v:.1f} s" for k, v in timings.items())
        print(f"{label}: exit {code}, {total:.1f} s ({parts})")
        if label.startswith("first"):
            print(f"  throughput: {2 * args.records / total:,.0f} records/s end to end")
    spark.stop()


if __name__ == "__main__":
    main()
