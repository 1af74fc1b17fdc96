{{
    config(
        tblproperties={'delta.enableChangeDataFeed': 'true'},
        partition_by=['source'],
    )
}}
{#
    The unified change log: one row per distinct change of every source, in one schema.
    Append-only; a change redelivered under a new Kafka offset has the same change_id and
    is kept once (the first delivery).
#}
with

keyed as (
    select * from {{ ref('int_change_log__keyed') }}
    where
        reject_reason is null and not is_noop
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
            partition by change_id
            order by bronze_commit_version, lineage.topic, lineage.`partition`, lineage.`offset`
        ) as delivery
    from keyed
),

new_changes as (
    select first_delivery.*
    from first_delivery
    {% if is_incremental() %}
        left anti join {{ this }} as logged on first_delivery.change_id = logged.change_id
    {% endif %}
    where delivery = 1
),

final as (
    select
        change_id,
        source,
        format,
        entity,
        entity_kind,
        table_name,
        record_key,
        op,
        seq,
        event_ts,
        row_image,
        changes,
        position,
        lineage
    from new_changes
)

select * from final
