{{
    config(
        materialized='table'
        if var('pipeline_build', false) or env_var('LAKEHOUSE_STORE_BATCH', '')
        else 'ephemeral',
        tblproperties={'delta.deletedFileRetentionDuration': 'interval 1 hours'},
    )
}}
{#
    The keyed changes a silver build reads, computed once for both silver models.

    Parsing and keying every format is most of what a full silver build costs, in planning
    as in running, and change_log and change_log_rejects each read all of it (one keeps the
    valid changes, the other the rejects). The pipeline's full builds (var
    `pipeline_build`, pyspark_jobs/silver/build.py) store it as a table, so that work
    happens once per build: the samples' first dbt build 36 s -> 22 s. So do its
    incremental builds of a large batch (the environment variable `LAKEHOUSE_STORE_BATCH`,
    set by the pipeline above `STORE_BATCH_ABOVE_ROWS` new bronze rows). Elsewhere (its
    smaller incremental builds, an analyst's `dbt build`) it is ephemeral: inlined into the
    two models, and no table is written. On a large bronze the incremental builds set the
    environment variable `LAKEHOUSE_BATCH_AFTER_BRONZE_VERSION`, the bronze version the
    last build read: every row at or before it was read by that build, so only the rows
    landed since are keyed.

    The table is rewritten by every full build and read by nothing else, so its replaced
    files need no long retention (`lakehouse maintain` cleans them with silver).
#}
select * from {{ ref('int_change_log__keyed') }}
{% if env_var('LAKEHOUSE_BATCH_AFTER_BRONZE_VERSION', '') %}
    where bronze_commit_version > {{ env_var('LAKEHOUSE_BATCH_AFTER_BRONZE_VERSION') | int }}
{% endif %}
