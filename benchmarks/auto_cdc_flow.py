"""Spark Declarative Pipelines definitions: AUTO CDC of the Debezium part into ``users``.

Loaded by ``spark-pipelines run`` (see ``benchmarks.auto_cdc``), never imported by the
package; the landing folder comes from the pipeline spec's configuration.
"""

from pyspark import pipelines as dp
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from benchmarks.auto_cdc import LANDING_CONF
from benchmarks.debezium_changes import LANDING_SCHEMA, user_changes

spark = SparkSession.active()
LANDING = spark.conf.get(LANDING_CONF)


@dp.temporary_view
def debezium_users():
    return user_changes(spark.readStream.schema(LANDING_SCHEMA).json(LANDING)).withColumn(
        "seq", F.struct("ts_ms", "lsn")
    )


dp.create_streaming_table("users", format="delta")
dp.create_auto_cdc_flow(
    target="users",
    source="debezium_users",
    keys=["USER_ID"],
    sequence_by="seq",
    apply_as_deletes="op = 'd'",
    except_column_list=["op", "ts_ms", "lsn", "seq"],
    stored_as_scd_type=1,
)
