"""``lakehouse``: run the pipeline's layers from a shell, cron or an orchestrator.

Exit codes: 0 success; 1 a step or quality gate failed; 2 bad usage or config;
3 another run holds the lock.
"""

from __future__ import annotations

import argparse
import signal
import sys
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import replace

from pyspark_jobs.config import ConfigError, LakehouseConfig, load_config
from pyspark_jobs.file_growth import SUGGESTED_THRESHOLD
from pyspark_jobs.locks import LockBusy
from pyspark_jobs.settings import Settings, SettingsError

EXIT_FAILED, EXIT_USAGE, EXIT_BUSY = 1, 2, 3


def _log(message: str) -> None:
    print(message, flush=True)


def _started(ctx: Context, step: str) -> None:
    """Start Spark, then say the step has begun: the same progress line ``run`` prints as
    it enters the step (watchers, the crash drills, time the work after the JVM's start)."""
    _ = ctx.spark  # the session starts here, not inside the step
    _log(step)


class Context:
    """Settings and config resolved once from the flags; the Spark session on demand."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.settings = Settings.from_env().with_overrides(
            lake_root=args.lake_root,
            master=args.master,
            config_path=args.config,
            spark_defaults=args.spark_defaults,
            conf=args.conf or (),
            dbt_target=args.dbt_target,
        )
        if getattr(args, "every", None) is not None:
            self.settings = replace(self.settings, long_lived=True)
        self.config: LakehouseConfig = load_config(self.settings.config_path)
        self._spark = None

    @property
    def spark(self):
        if self._spark is None:
            from pyspark_jobs.locks import hold_embedded_metastore_lock
            from pyspark_jobs.session import get_spark, uses_embedded_metastore

            if self.settings.lock_mode == "host" and uses_embedded_metastore(self.settings):
                from pyspark import SparkContext

                # In-process commands (tests) reuse a JVM that has Derby open already.
                own_jvm = SparkContext._active_spark_context is not None
                hold_embedded_metastore_lock(
                    self.settings.state_dir, None if own_jvm else self.settings.metastore_dir
                )
            self._spark = get_spark(self.settings)
        return self._spark


def _not_negative(
    convert: Callable[[str], float], what: str, unit: str = ""
) -> Callable[[str], float]:
    """An argparse type: ``convert(text)``, refused with a line naming ``what`` it must be
    when it is not one, or when it is negative (or NaN)."""

    def parse(text: str) -> float:
        try:
            value = convert(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not {what}: {text!r}") from None
        if not value >= 0:
            raise argparse.ArgumentTypeError(f"must be 0 or more{unit}: {text!r}")
        return value

    return parse


# ``--every`` and the other intervals; ``--compact-files``.
_seconds = _not_negative(float, "a number of seconds", " seconds")
_count = _not_negative(int, "a whole number")


def _stop_on_signals() -> threading.Event:
    """A flag that SIGTERM (systemd, docker stop) or Ctrl-C sets.

    Long-running commands look at it between batches or cycles: a flag rather than an
    exception, so no Spark call or dbt build is cut off halfway.
    """
    stop = threading.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda *_: stop.set())
    return stop


def cmd_ingest(ctx: Context, args: argparse.Namespace) -> int:
    from pyspark_jobs.bronze.ingest import chosen_sources, ingest, ingest_locks

    # Host locks come before the Spark session: a second ingest refuses at once instead of
    # booting a JVM that would block on the embedded metastore. (Lake locks are rows of a
    # Delta table: they start the session.)
    sources = chosen_sources(ctx.config, args.source or ())
    # --every ends after the batch in flight.
    stop = _stop_on_signals() if args.every is not None else threading.Event()
    with ingest_locks(ctx.settings, sources, lambda: ctx.spark):
        _started(ctx, "bronze: building")
        reports = ingest(
            ctx.spark,
            ctx.settings,
            ctx.config,
            source_names=args.source or (),
            every_seconds=args.every,
            max_per_batch=args.max_per_batch,
            log=_log,
            take_locks=False,
            stop=stop,
        )
    for r in reports:
        _log(
            f"bronze {r.source}: {len(r.batches)} batches, read {r.read}, landed {r.landed}, "
            f"quarantined {r.quarantined}"
        )
    return 0


def cmd_silver(ctx: Context, args: argparse.Namespace) -> int:
    from pyspark_jobs.silver.build import build_silver

    _started(ctx, "silver: building")
    build_silver(ctx.spark, ctx.settings, ctx.config, full_refresh=args.full_refresh, log=_log)
    return 0


def cmd_gold(ctx: Context, args: argparse.Namespace) -> int:
    from pyspark_jobs.gold.rebuild import apply_gold_finishing_rebuilds, rebuild_table

    _started(ctx, "gold: building")
    if args.rebuild:
        rebuild_table(ctx.spark, ctx.config, args.rebuild, log=_log)
    else:
        apply_gold_finishing_rebuilds(ctx.spark, ctx.config, log=_log)
    return 0


def cmd_run(ctx: Context, args: argparse.Namespace) -> int:
    from pyspark_jobs.bronze.ingest import chosen_sources, ingest_locks

    for flag, value in (
        ("--maintain-every", args.maintain_every),
        ("--compact-files", args.compact_files),
    ):
        if value is not None and args.every is None:
            print(f"lakehouse run: {flag} needs --every", file=sys.stderr)
            return EXIT_USAGE
    # As for ingest: refuse a concurrent run before booting a JVM on the same metastore
    # (and before importing the layers: Great Expectations alone takes seconds).
    with ingest_locks(ctx.settings, chosen_sources(ctx.config), lambda: ctx.spark):
        from pyspark_jobs.pipeline import run_continuously, run_pipeline

        if args.every is None:
            return run_pipeline(ctx.spark, ctx.settings, ctx.config, log=_log, take_locks=False)
        return run_continuously(
            ctx.spark,
            ctx.settings,
            ctx.config,
            every_seconds=args.every,
            stop=_stop_on_signals(),
            log=_log,
            take_locks=False,
            maintain_every_seconds=args.maintain_every,
            compact_files=args.compact_files or 0,
        )


def cmd_maintain(ctx: Context, args: argparse.Namespace) -> int:
    from pyspark_jobs.bronze.ingest import chosen_sources, ingest_locks

    # The pipeline's locks, as for run: a compaction racing an ingest's or a gold run's
    # commit would make one of them fail.
    with ingest_locks(ctx.settings, chosen_sources(ctx.config), lambda: ctx.spark):
        from pyspark_jobs.maintain import LAYERS, maintain

        layers = LAYERS if args.layer == "all" else (args.layer,)
        maintain(ctx.spark, ctx.config, layers, dry_run=args.dry_run, log=_log)
    return 0


def cmd_replay_rejects(ctx: Context, args: argparse.Namespace) -> int:
    from pyspark_jobs.bronze.ingest import chosen_sources, ingest_locks

    # Silver is built as part of the replay: refuse beside a run or an ingest, as run does.
    chosen_sources(ctx.config, args.source or ())  # an unknown name is a usage error
    with ingest_locks(ctx.settings, chosen_sources(ctx.config), lambda: ctx.spark):
        from pyspark_jobs.silver.replay import replay_rejects

        replay_rejects(ctx.spark, ctx.settings, ctx.config, args.source or (), log=_log)
    return 0


def cmd_validate(ctx: Context, args: argparse.Namespace) -> int:
    from pyspark_jobs.pipeline import gate_failure_message, write_run_report
    from pyspark_jobs.quality.gate_reuse import forget
    from pyspark_jobs.quality.gates import run_gate
    from pyspark_jobs.run_summary import RunSummary, format_summary

    _started(ctx, f"{args.layer} gate: validating")
    summary = RunSummary(command=f"validate --layer {args.layer}")
    # Always a validation (a run may skip one whose inputs did not change): a failure
    # also drops the layer's stored pass, so the next run validates too.
    gate = run_gate(ctx.spark, ctx.settings, ctx.config, args.layer, run_name=summary.run_id)
    if not gate.success:
        forget(ctx.settings, args.layer)
    summary.gates[args.layer] = gate.as_dict()
    summary.timings[f"{args.layer} gate"] = gate.seconds
    summary.finish("succeeded" if gate.success else f"stopped by the {args.layer} gate")
    summary.save(ctx.settings.state_dir / "runs", keep=ctx.config.run_summaries_kept)
    _log(format_summary(summary))
    report = write_run_report(ctx.settings)
    if not gate.success:
        _log(gate_failure_message(gate, report))
        return EXIT_FAILED
    _log(f"report: {report}")
    return 0


def cmd_report(ctx: Context, args: argparse.Namespace) -> int:
    from pyspark_jobs.pipeline import write_run_report
    from pyspark_jobs.quality import gx_context
    from pyspark_jobs.quality.report import serve

    # Data Docs from the stored validation results: no Spark needed.
    gx_context.build_docs(gx_context.open_context(ctx.settings.reports_dir))
    report = write_run_report(ctx.settings)
    _log(f"report: {report}")
    _log(f"data docs: {gx_context.data_docs_index(ctx.settings.reports_dir)}")
    if args.serve:
        serve(ctx.settings.reports_dir, args.port)
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="lakehouse",
        description="CDC streams -> bronze -> silver change log -> gold current-state tables.",
    )
    parser.add_argument(
        "--lake-root",
        help="the lake: a folder (tables, metastore, checkpoints, reports) or a URI such as "
        "file:///srv/lake or s3a://bucket/lake (env LAKEHOUSE_ROOT; default ./lake in the repo)",
    )
    parser.add_argument(
        "--master", help="Spark master URL (env LAKEHOUSE_SPARK_MASTER; default local[*])"
    )
    parser.add_argument(
        "--config", help="sources file (env LAKEHOUSE_CONFIG; default config/sources.yml)"
    )
    parser.add_argument(
        "--spark-defaults",
        metavar="FILE",
        help="Spark settings in spark-defaults form ('spark.KEY VALUE' lines; ${VAR} is read "
        "from the environment), over the project's own (env LAKEHOUSE_SPARK_DEFAULTS)",
    )
    parser.add_argument(
        "--conf",
        action="append",
        metavar="KEY=VALUE",
        help="a Spark setting, over the project's and the --spark-defaults file's (repeatable)",
    )
    parser.add_argument(
        "--dbt-target",
        metavar="NAME",
        help="target of the committed dbt profile for the silver build: local (in-process, "
        "default) or thrift (a Spark Thrift Server) (env LAKEHOUSE_DBT_TARGET)",
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    ingest = sub.add_parser(
        "ingest",
        help="land new CDC records in bronze (exactly once); stops when caught up",
        description="Land every new record of the sources in bronze.cdc_raw (unreadable "
        "ones in bronze.cdc_quarantine), then stop. Safe to schedule: a run killed at any "
        "point is completed by the next one without losing or duplicating records.",
    )
    ingest.add_argument(
        "--source", action="append", metavar="NAME", help="only this source (repeatable)"
    )
    ingest.add_argument(
        "--every",
        type=_seconds,
        metavar="SECONDS",
        help="keep running, starting a batch every SECONDS, until interrupted",
    )
    ingest.add_argument(
        "--max-per-batch",
        type=int,
        default=1000,
        metavar="N",
        help="files (landing) or offsets (Kafka) per micro-batch (default 1000)",
    )
    ingest.set_defaults(handler=cmd_ingest)

    silver = sub.add_parser(
        "silver",
        help="build silver.change_log from bronze with dbt (in-process)",
        description="Publish the declared entities, then `dbt run` the project inside this "
        "process's Spark session: only the incremental models when only bronze moved since "
        "the last build, nothing when neither bronze nor the project changed.",
    )
    silver.add_argument(
        "--full-refresh", action="store_true", help="rebuild the change log from all of bronze"
    )
    silver.set_defaults(handler=cmd_silver)

    gold = sub.add_parser(
        "gold",
        help="apply new change-log rows to the gold current-state tables",
        description="Fold each key's new changes in seq order and MERGE them into "
        "gold.<table> (all tables of a fold family together, MERGEs concurrently). A run "
        "killed at any point is finished by the next one.",
    )
    gold.add_argument(
        "--rebuild",
        metavar="TABLE",
        help="empty one gold table (its history and tombstones too) and fold it again from "
        "the whole change log, e.g. after fixing a declared type; other tables are brought "
        "up to date first; a key whose state is still rejected keeps its row, and a rebuild "
        "cut short is finished by the next gold step",
    )
    gold.set_defaults(handler=cmd_gold)

    run = sub.add_parser(
        "run",
        help="ingest, silver and gold in order, each behind its quality gate",
        description="Run every layer in one Spark session and print the run summary. "
        "With --every, keep the session warm and run a cycle (bronze, silver, gold, each "
        "behind its gate, with its own run summary) every SECONDS; a cycle stopped by a gate "
        "promotes nothing past it and the next cycle tries again. SIGTERM or Ctrl-C ends it "
        "after the cycle in flight, with exit 0.",
    )
    run.add_argument(
        "--every",
        type=_seconds,
        metavar="SECONDS",
        help="keep running, starting a cycle every SECONDS (at once when the previous one "
        "took longer), until SIGTERM or Ctrl-C",
    )
    run.add_argument(
        "--maintain-every",
        type=_seconds,
        metavar="SECONDS",
        help="with --every: also run `lakehouse maintain` (every layer) between two cycles "
        "once SECONDS have passed since the start or the last maintenance (e.g. 3600: "
        "each cycle adds files that later cycles read)",
    )
    run.add_argument(
        "--compact-files",
        type=_count,
        metavar="N",
        help="with --every: between two cycles, compact (OPTIMIZE) each table that gained "
        f"N data files since the loop last compacted it (e.g. {SUGGESTED_THRESHOLD}; default: "
        "never); a table's files are counted from its Delta log",
    )
    run.set_defaults(handler=cmd_run)

    maintain = sub.add_parser(
        "maintain",
        help="compact (OPTIMIZE) and clean (VACUUM) the lake's Delta tables",
        description="OPTIMIZE then VACUUM every Delta table of a layer (its schema and the "
        "pipeline state tables it writes), printing one line per table: files compacted, "
        "the retention used and why, files removed. VACUUM keeps a table's "
        "delta.deletedFileRetentionDuration (Delta's default: 7 days); on "
        "silver.change_log it is first raised when a gold table has yet to read older "
        "versions of its change feed (never lowered). Takes the pipeline's locks: exit 3 "
        "while a run or an ingest is in progress.",
    )
    maintain.add_argument(
        "--layer",
        choices=("bronze", "silver", "gold", "all"),
        default="all",
        help="the tables of one layer (default all)",
    )
    maintain.add_argument(
        "--dry-run",
        action="store_true",
        help="change nothing: print each table's file count, the retention and how many "
        "files VACUUM would remove",
    )
    maintain.set_defaults(handler=cmd_maintain)

    replay = sub.add_parser(
        "replay-rejects",
        help="land the silver rejects that are valid now (after a config fix), exactly once",
        description="Build silver as `lakehouse silver` does, with the current config, "
        "and stage the bronze records of silver.change_log_rejects again: those that now "
        "make valid changes land in silver.change_log (each change once, however often "
        "replayed) and leave the rejects; the others stay, with their current reason. The "
        "next gold run applies the landed changes. Takes the pipeline's locks: exit 3 "
        "while a run or an ingest is in progress.",
    )
    replay.add_argument(
        "--source", action="append", metavar="NAME", help="only this source's rejects (repeatable)"
    )
    replay.set_defaults(handler=cmd_replay_rejects)

    validate = sub.add_parser(
        "validate",
        help="run one layer's quality gate on the tables as they are",
        description="Validate one layer with its Great Expectations suites (expectations/); "
        "exit 1 naming the failed expectations. Results go to the report under "
        "<lake>/reports.",
    )
    validate.add_argument("--layer", required=True, choices=("bronze", "silver", "gold"))
    validate.set_defaults(handler=cmd_validate)

    report = sub.add_parser(
        "report",
        help="build the data-quality report (Data Docs + run summary) and print its path",
        description="Rebuild GX Data Docs and <lake>/reports/index.html (latest run, gates, "
        "trend of the last runs).",
    )
    report.add_argument("--serve", action="store_true", help="serve the report folder on 127.0.0.1")
    report.add_argument("--port", type=int, default=8000, help="port for --serve (default 8000)")
    report.set_defaults(handler=cmd_report)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    handler: Callable[[Context, argparse.Namespace], int] = args.handler
    started = time.time()
    try:
        ctx = Context(args)
        code = handler(ctx, args)
    except ConfigError as exc:
        print(f"lakehouse: config error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except SettingsError as exc:
        print(f"lakehouse: settings error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except LockBusy as exc:
        print(f"lakehouse: {exc}", file=sys.stderr)
        return EXIT_BUSY
    except KeyboardInterrupt:
        print("lakehouse: interrupted", file=sys.stderr)
        return 130
    except Exception as exc:  # noqa: BLE001 - the CLI's last line of defence: one clear line
        from pyspark_jobs.errors import describe

        print(f"lakehouse {args.command}: failed: {describe(exc)}", file=sys.stderr)
        return EXIT_FAILED
    outcome = "done" if code == 0 else "failed"
    _log(f"lakehouse {args.command}: {outcome} in {time.time() - started:.1f} s")
    return code


def program(argv: Sequence[str] | None = None) -> int:
    """``main`` as the ``lakehouse`` program: it returns once its Spark JVM has ended, so
    the next command of a script finds the embedded metastore free. (``main`` alone keeps
    the JVM for the rest of the process, as in-process callers such as the tests want.)"""
    code = main(argv)
    if "pyspark" in sys.modules:  # not for --help or a config error: no JVM was started
        from pyspark_jobs.session import end_jvm

        end_jvm()
    return code


if __name__ == "__main__":
    sys.exit(program())
