{#
    Bronze records that are valid JSON but not valid messages of their format, with the
    reason and their bronze lineage. Fix the config and replay them
    (`lakehouse replay-rejects`): the now-valid ones land in change_log once and leave
    this table; nothing is dropped silently.

    Partitioned by source (dbt_project.yml), as bronze and the change log are: a batch's
    rejects name the sources the silver gate counts again in Delta's log
    (quality/gate_reuse.py), and the run summary counts them per source from the log.
#}
with

rejected as (
    select * from {{ ref('int_change_log__batch') }}
    where
        reject_reason is not null
        {% if is_incremental() %}
            and bronze_commit_version > (
                select coalesce(max(lineage.bronze_commit_version), -1) from {{ this }}
            )
        {% endif %}
),

first_delivery as (
    select
        *,
        row_number() over (
            partition by source, lineage.topic, lineage.`partition`, lineage.`offset`
            order by bronze_commit_version
        ) as delivery
    from rejected
),

final as (
    select
        source,
        format,
        entity,
        reject_reason,
        position,
        lineage
    from first_delivery
    where delivery = 1
)

select * from final
