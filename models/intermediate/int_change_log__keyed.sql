{#
    Every staged change with its declared entity: the canonical record key built from the
    entity's declared key columns, the change id, and the reason a change cannot enter the
    log (format problems from staging, an undeclared entity, missing key columns, a
    one-string key that does not split into the key columns). A truncate names no key:
    its record_key is '{}'.
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
        ) as object_parts,
        {#
            A key that is one string (GoldenGate: the values joined by `_`). Values may
            hold `_` themselves, so the row image wins when it carries every key column
            (and must join back to the string); without it the string must split into
            exactly one part per key column (a single key column takes the whole string).
        #}
        case
            when size(key_columns) = 1 then array(key_text)
            else split(key_text, '_', -1)
        end as text_parts
    from declared
),

key_checks as (
    select
        *,
        case
            when op = 'truncate' then cast(array() as array<string>)
            when key_text is null then object_parts
            when not exists(object_parts, v -> v is null) then object_parts
            when size(text_parts) = size(key_columns) then text_parts
            else object_parts
        end as key_parts,
        case
            when key_text is null or op = 'truncate' then null
            when
                not exists(object_parts, v -> v is null)
                and array_join(object_parts, '_') != key_text
                then concat(
                    'key does not match the key columns of the row: ', key_text, ' vs ',
                    array_join(object_parts, '_')
                )
            when exists(object_parts, v -> v is null) and size(text_parts) != size(key_columns)
                then concat(
                    'key does not split into the declared key columns (',
                    array_join(key_columns, ', '), '): ', key_text
                )
        end as key_problem
    from key_values
),

keyed as (
    select
        *,
        case
            when op = 'truncate' then '{}'
            else to_json(map_from_arrays(key_columns, key_parts))
        end as record_key
    from key_checks
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
            when key_problem is not null then key_problem
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
