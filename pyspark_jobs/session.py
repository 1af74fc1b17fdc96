"""The one SparkSession factory: every job, the tests and in-process dbt use it."""

from __future__ import annotations

from pyspark.sql import SparkSession

from pyspark_jobs.settings import Settings


def spark_conf(settings: Settings) -> dict[str, str]:
    """The Spark settings that make a table written by a job the same table dbt sees.

    The committed dbt profile (``profiles.yml``) repeats these for analysts' own
    ``dbt run``; ``tests/test_session.py`` keeps the two in step.
    """
    metastore_url = f"jdbc:derby:;databaseName={settings.metastore_dir};create=true"
    return {
        "spark.sql.extensions": "io.delta.sql.DeltaSparkSessionExtension",
        "spark.sql.catalog.spark_catalog": "org.apache.spark.sql.delta.catalog.DeltaCatalog",
        "spark.sql.warehouse.dir": str(settings.warehouse_dir),
        "spark.hadoop.javax.jdo.option.ConnectionURL": metastore_url,
        "spark.sql.catalogImplementation": "hive",
        "spark.sql.shuffle.partitions": str(settings.shuffle_partitions),
        # Read when the JVM starts (the first session of a process): later sessions of
        # the same process share that JVM.
        "spark.driver.memory": settings.driver_memory,
        "spark.sql.session.timeZone": "UTC",
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        # Delta rebuilds a table's snapshot with this many tasks; the default 50 makes every
        # small table pay for 50 tasks on each read.
        "spark.databricks.delta.snapshotPartitions": "2",
        # Derby writes derby.log into the working directory unless told otherwise.
        "spark.driver.extraJavaOptions": (
            f"-Dderby.stream.error.file={settings.lake_root / 'derby.log'}"
        ),
        "spark.databricks.delta.schema.autoMerge.enabled": "false",
        "spark.sql.streaming.stopGracefullyOnShutdown": "true",
    }


def get_spark(settings: Settings, app_name: str = "cdc-lakehouse") -> SparkSession:
    """Return the active session, creating it with the lake's settings on first use.

    >>> spark = get_spark(Settings.from_env())  # doctest: +SKIP
    >>> spark.sql("show databases").show()       # doctest: +SKIP
    """
    settings.lake_root.mkdir(parents=True, exist_ok=True)
    builder = SparkSession.builder.appName(app_name).master(settings.master)
    for key, value in spark_conf(settings).items():
        builder = builder.config(key, value)
    spark = builder.enableHiveSupport().getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark
