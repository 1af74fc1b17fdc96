{#
    The pipeline's incremental builds pass `batch_formats` (the formats bronze received
    rows of since the last build, or every format with the bound below) and, on a large
    bronze, set `LAKEHOUSE_BATCH_INGESTED_SINCE_MS` in the environment
    (pyspark_jobs/silver/build.py; macro union_staged_changes): the model is then inlined
    into the two silver models (ephemeral) over those rows only, so a batch of one source
    plans one format, not all of them, and reads its newest files. The view stays as the
    full build left it, over every configured format.
#}
{{ config(materialized='ephemeral' if var('batch_formats', none) else 'view') }}
{#
    Every staged change with its declared entity: the canonical record key built from the
    entity's declared key columns, the change id, and the reason a change cannot enter the
    log (format problems from staging, an undeclared entity, a field named twice in the
    key or the row image or deeper in the record's value or key, missing key columns, a
    one-string key that does not split into the key columns, a key value that is a JSON
    object or array, or does not cast to its column's declared type). A truncate names no
    key: its record_key is '{}'.
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
        entities.key_columns,
        entities.columns as column_types
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
        end as text_parts,
        {#
            A field named twice in the key or the row image: JSON parsers disagree on
            which one counts (Spark's take the first, most others the last), so the
            change cannot be read one way only.
        #}
        {{ field_named_twice('key_json') }} as key_field_twice,
        {{ field_named_twice('row_image') }} as image_field_twice
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
        {#
            Which key values taken from the key or the image are nested JSON: 'object',
            'array', else null (parts of a one-string key are text, never nested). Only
            text that starts like a nested value ({, [) is parsed again, as a variant, to
            tell an object from a string that merely looks like one.
        #}
        transform(
            key_columns,
            (k, i) -> case
                when
                    (key_text is null or not exists(object_parts, v -> v is null))
                    and left(object_parts[i], 1) in ('{', '[')
                    then case split_part(
                        schema_of_variant(
                            case
                                when from_json(key_json, 'map<string, string>')[k] is not null
                                    then from_json(key_json, 'map<string, variant>')[k]
                                else from_json(row_image, 'map<string, variant>')[k]
                            end
                        ),
                        '<',
                        1
                    )
                        when 'OBJECT' then 'object'
                        when 'ARRAY' then 'array'
                    end
            end
        ) as key_nesting,
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

typed_keys as (
    select
        *,
        {#
            The first key value that is nested JSON or does not cast to its column's
            declared type, by gold's cast rules (macros/castable_to_declared_type.sql): a
            key gold could not type never enters the log.
        #}
        get(
            filter(
                transform(
                    key_columns,
                    (k, i) -> case
                        when op = 'truncate' or key_parts[i] is null then null
                        when key_nesting[i] is not null
                            then concat(
                                'key column ', k, ' is a JSON ', key_nesting[i], ', not ',
                                if(column_types[k] = 'int', 'an ', 'a '),
                                coalesce(column_types[k], 'declared type'), ': ', key_parts[i]
                            )
                        when not {{ castable_to_declared_type('key_parts[i]', 'column_types[k]') }}
                            then concat(
                                'key column ', k, ' is not ',
                                if(column_types[k] = 'int', 'an ', 'a '),
                                coalesce(column_types[k], 'declared type'), ': "', key_parts[i], '"'
                            )
                    end
                ),
                problem -> problem is not null
            ),
            0
        ) as key_value_problem
    from key_checks
),

keyed as (
    select
        *,
        case
            when op = 'truncate' then '{}'
            else to_json(map_from_arrays(key_columns, key_parts))
        end as record_key
    from typed_keys
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
            when key_field_twice is not null
                then concat('field named twice in the key: ', key_field_twice)
            when image_field_twice is not null
                then concat('field named twice in the row image: ', image_field_twice)
            when key_problem is not null then key_problem
            when exists(key_parts, v -> v is null)
                then concat(
                    'key columns missing: ',
                    array_join(filter(key_columns, (k, i) -> key_parts[i] is null), ', ')
                )
            when key_value_problem is not null then key_value_problem
            {# Deeper than the checks above name: a nested object, a cell, the envelope. #}
            when field_twice_within is not null
                then concat('field named twice inside the ', field_twice_within)
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
