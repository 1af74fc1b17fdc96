"""One `apply_gold` in a process of its own, for the crash-point test.

    python -m tests.gold.crash_run --lake L --config C [--append rows.json]

Creates ``silver.change_log`` on first use, appends the given change-log rows (as
``tests.gold.changelog.change`` builds them, in JSON), then applies gold. A crash point
named in ``LAKEHOUSE_FAULT`` kills the process group there.
"""

from __future__ import annotations

import argparse
import json
from datetime import datetime
from pathlib import Path

from pyspark_jobs.config import load_config
from pyspark_jobs.gold.apply import apply_gold
from pyspark_jobs.session import get_spark
from pyspark_jobs.settings import Settings
from tests.gold.changelog import append, create_change_log


def _row(values: list) -> tuple:
    # JSON has no timestamps: event_ts (index 9) travels as ISO text.
    values[9] = datetime.fromisoformat(values[9])
    return tuple(values)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--lake", type=Path, required=True)
    parser.add_argument("--config", type=Path, required=True)
    parser.add_argument("--append", type=Path)
    args = parser.parse_args()
    settings = Settings(
        lake_root=args.lake, master="local[1]", config_path=args.config, shuffle_partitions=1
    )
    spark = get_spark(settings, app_name="gold-crash-run")
    if not spark.catalog.tableExists("silver.change_log"):
        create_change_log(spark)
    if args.append:
        append(spark, [_row(r) for r in json.loads(args.append.read_text())])
    apply_gold(spark, load_config(args.config), log=lambda _: None)


if __name__ == "__main__":
    main()
