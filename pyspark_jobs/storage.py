"""Small files in the lake, wherever it is: a local folder, or any Hadoop file system URI.

A local path is read and written with Python; a URI (``file://``, ``s3a://``,
``abfss://``, ``gs://``) through the session's Hadoop ``FileSystem``, with the same
connectors and credentials Spark uses for the tables.
"""

from __future__ import annotations

import os
import sys
import uuid
from pathlib import Path
from typing import Any

from pyspark.sql import SparkSession

from pyspark_jobs.catalog import forget_table, table_exists
from pyspark_jobs.settings import is_uri


def _hadoop_fs(spark: SparkSession, location: str) -> tuple[Any, Any]:
    """The Hadoop ``FileSystem`` and ``Path`` of a URI (through the session's JVM)."""
    jvm: Any = spark.sparkContext._jvm
    path = jvm.org.apache.hadoop.fs.Path(location)
    return path.getFileSystem(spark.sparkContext._jsc.hadoopConfiguration()), path


def read_text(spark: SparkSession, location: str) -> str | None:
    """The file's text, or None when there is no such file."""
    if not is_uri(location):
        try:
            return Path(location).read_text()
        except FileNotFoundError:
            return None
    fs, path = _hadoop_fs(spark, location)
    if not fs.exists(path):
        return None
    jvm: Any = spark.sparkContext._jvm
    stream = fs.open(path)
    try:
        data = jvm.org.apache.commons.io.IOUtils.toByteArray(stream)
    finally:
        stream.close()
    return bytes(data).decode()


def remove_unfinished_log_writes(spark: SparkSession, checkpoint: str) -> list[str]:
    """Delete the temporary files a killed process left in a streaming checkpoint's
    ``offsets`` and ``commits`` logs; the names deleted.

    Spark writes each log entry to a hidden ``.<batch>.<uuid>.tmp`` file, then renames it,
    so such a file is never read. But a query killed while writing its very first offsets
    leaves one behind, and Spark then refuses that checkpoint for good
    (``STATE_STORE_CHECKPOINT_LOCATION_NOT_EMPTY``: the offsets "should be empty on batch
    0"). Call it only while no query runs on ``checkpoint``.
    """
    removed = []
    for log in ("offsets", "commits"):
        fs, folder = _hadoop_fs(spark, f"{checkpoint.rstrip('/')}/{log}")
        if not fs.exists(folder):
            continue
        for status in fs.listStatus(folder):
            name = status.getPath().getName()
            if name.startswith(".") and ".tmp" in name:
                fs.delete(status.getPath(), False)
                removed.append(f"{log}/{name}")
    return removed


def remove_unregistered_new_table(spark: SparkSession, name: str) -> bool:
    """Delete the folder of managed table ``name`` when the catalog does not know the
    table and the folder holds only a creation: whether it did.

    ``create table`` commits the table's first Delta version, then registers the table in
    the catalog. A process killed between the two leaves a folder Delta refuses to create
    the table over (``DELTA_CREATE_TABLE_WITH_NON_EMPTY_LOCATION``) on every later run. A
    folder with data files or a later commit is left alone: that is data, not a creation.
    """
    schema, _, table = name.rpartition(".")
    if not spark.catalog.databaseExists(schema) or table_exists(spark, name):
        return False
    location = f"{spark.catalog.getDatabase(schema).locationUri.rstrip('/')}/{table}"
    fs, folder = _hadoop_fs(spark, location)
    if not fs.exists(folder):
        return False
    entries = {s.getPath().getName() for s in fs.listStatus(folder)}
    if entries - {"_delta_log"}:
        return False
    if "_delta_log" in entries:
        for status in fs.listStatus(folder.suffix("/_delta_log")):
            entry = status.getPath().getName()
            if status.isFile() and not entry.startswith(".") and not entry.startswith("0" * 20):
                return False
    fs.delete(folder, True)
    forget_table(name)
    return True


def clear_killed_creation(spark: SparkSession, name: str) -> None:
    """Call before creating managed table ``name``: remove a folder a killed creation of
    it left (``remove_unregistered_new_table``), and say so on stderr."""
    if remove_unregistered_new_table(spark, name):
        print(
            f"removed the folder of {name}: a killed run created the table and never "
            "registered it (it held no data); creating it again",
            file=sys.stderr,
        )


def create_table_if_missing(spark: SparkSession, name: str, ddl: str) -> None:
    """Run ``ddl``, the creation of managed table ``name``, unless the catalog has the
    table; first ``clear_killed_creation``. One catalog lookup when the table exists."""
    if table_exists(spark, name):
        return
    clear_killed_creation(spark, name)
    spark.sql(ddl)


def write_once(spark: SparkSession, location: str, text: str) -> bool:
    """Create the file with ``text`` unless it exists; whether this call created it.

    The file appears whole or not at all: a local one is written aside and linked in
    (``link`` fails when the name exists); a remote one is one object written by
    ``create(overwrite=false)`` and visible when closed.
    """
    if not is_uri(location):
        target = Path(location)
        target.parent.mkdir(parents=True, exist_ok=True)
        if target.exists():
            return False
        aside = target.with_name(f".{target.name}.{os.getpid()}.{uuid.uuid4().hex}")
        aside.write_text(text)
        try:
            os.link(aside, target)
        except FileExistsError:
            return False
        finally:
            aside.unlink()
        return True
    fs, path = _hadoop_fs(spark, location)
    if fs.exists(path):
        return False
    try:
        stream = fs.create(path, False)
    except Exception as exc:  # noqa: BLE001 - py4j wraps FileAlreadyExistsException
        if "FileAlreadyExistsException" in str(exc):
            return False
        raise
    try:
        stream.write(bytearray(text.encode()))
    finally:
        stream.close()
    return True


def replace_local_text(target: Path, text: str) -> None:
    """Write ``text`` to a local file, replacing it whole or not at all."""
    replace_local_bytes(target, text.encode())


def replace_local_bytes(target: Path, data: bytes) -> None:
    """Write ``data`` to a local file, replacing it whole or not at all: written aside,
    synced (a crash never leaves an empty file renamed in), then renamed over ``target``."""
    target.parent.mkdir(parents=True, exist_ok=True)
    aside = target.with_name(f".{target.name}.{os.getpid()}.{uuid.uuid4().hex}")
    try:
        with aside.open("wb") as out:
            out.write(data)
            out.flush()
            os.fsync(out.fileno())
        os.replace(aside, target)
    finally:
        aside.unlink(missing_ok=True)
