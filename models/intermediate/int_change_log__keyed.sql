{#
    Every staged change with its declared entity: the canonical record key built from the
    entity's declared key columns, the change id, and the reason a change cannot enter the
    log (format problems from staging, an undeclared entity, missing key columns).
#}
with

staged as (
    {{ union_staged_changes() }}
),

entities as (
    select * from {{ source('lakehouse', 'entities') }}
),

declared as (
    select
        staged.*,
        entities.table_name,
        entities.entity_kind,
        entities.key_columns
    from staged
    left join entities
        on staged.source = entities.source and staged.entity = entities.entity
),

key_values as (
    select
        *,
        {# Key columns come from the message key, else from the row image. #}
        transform(
            key_columns,
            k -> coalesce(
                from_json(key_json, 'map<string, string>')[k],
                from_json(row_image, 'map<string, string>')[k]
            )
        ) as key_parts
    from declared
),

keyed as (
    select
        *,
        to_json(map_from_arrays(key_columns, key_parts)) as record_key
    from key_values
),

final as (
    select
        sha2(concat_ws('|', source, entity, record_key, op, position), 256) as change_id,
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
        is_noop,
        case
            when problem is not null then problem
            when is_noop then null
            when entity is null then 'no entity name in the message'
            when table_name is null then concat('entity not declared in config: ', entity)
            when exists(key_parts, v -> v is null) then concat(
                'key columns missing: ',
                array_join(
                    filter(key_columns, (k, i) -> key_parts[i] is null), ', '
                )
            )
        end as reject_reason,
        named_struct(
            'topic', topic,
            'partition', `partition`,
            'offset', `offset`,
            'kafka_timestamp', kafka_timestamp,
            'ingested_at', ingested_at,
            'batch_id', batch_id,
            'bronze_commit_version', bronze_commit_version
        ) as lineage,
        bronze_commit_version
    from keyed
)

select * from final
