{#
    Debezium change events: `op` c (create) / r (snapshot read) / u (update) upsert the
    `after` image, d deletes by key, t (TRUNCATE) empties the table named by `source`
    (a change with op truncate; the event has no key and no images). The null-value
    record Debezium sends after a delete (the Kafka tombstone for log compaction) changes
    nothing, and neither does a message event (op m: a logical decoding message such as
    pg_logical_emit_message, which names no table): both are no-ops, neither change nor
    reject; the silver gate counts the message events as skipped.
#}
with

records as (
    {{ bronze_records('debezium') }}
),

events as (
    select
        *,
        {# The JSON converter with schemas on wraps each event as {"schema", "payload"}. #}
        case
            when get_json_object(value, '$.schema') is not null
                then get_json_object(value, '$.payload')
            else value
        end as event
    from records
),

fields as (
    select
        *,
        json_object_keys(event) as event_fields,
        get_json_object(event, '$.op') as dbz_op,
        get_json_object(event, '$.after') as after_image,
        get_json_object(event, '$.before') as before_image,
        get_json_object(event, '$.source.db') as source_db,
        get_json_object(event, '$.source.table') as source_table,
        try_cast(get_json_object(event, '$.source.ts_ms') as bigint) as source_ts_ms,
        try_cast(get_json_object(event, '$.ts_ms') as bigint) as event_ts_ms,
        coalesce(
            try_cast(get_json_object(event, '$.source.lsn') as bigint),
            try_cast(get_json_object(event, '$.source.scn') as bigint),
            try_cast(get_json_object(event, '$.source.pos') as bigint)
        ) as source_position,
        concat_ws(
            ':',
            get_json_object(event, '$.source.lsn'),
            get_json_object(event, '$.source.change_lsn'),
            get_json_object(event, '$.source.commit_lsn'),
            get_json_object(event, '$.source.scn'),
            get_json_object(event, '$.source.file'),
            get_json_object(event, '$.source.pos'),
            get_json_object(event, '$.source.row'),
            get_json_object(event, '$.source.event_serial_no')
        ) as source_coordinates
    from events
),

final as (
    select
        source,
        format,
        case
            when source_table is not null then concat_ws('.', source_db, source_table)
            else topic
        end as entity,
        case
            when dbz_op in ('c', 'r', 'u') then 'upsert'
            when dbz_op = 'd' then 'delete'
            when dbz_op = 't' then 'truncate'
        end as op,
        key as key_json,
        cast(null as string) as key_text,
        case when dbz_op = 'd' then before_image else after_image end as row_image,
        cast(null as map<string, struct<op: string, value: string, ts: bigint>>) as changes,
        array(coalesce(source_ts_ms, event_ts_ms, 0), coalesce(source_position, 0), `offset`)
            as seq,
        coalesce(timestamp_millis(source_ts_ms), timestamp_millis(event_ts_ms), kafka_timestamp)
            as event_ts,
        case
            when source_coordinates != '' then concat('debezium:', source_coordinates)
            else {{ kafka_position() }}
        end as position,
        value is null or coalesce(dbz_op = 'm', false) as is_noop,
        coalesce(
            case
                when value is null then null
                when event_fields is null then 'value is not a JSON object'
                when dbz_op is null then 'no op field'
                when dbz_op = 'm' then null
                when dbz_op not in ('c', 'r', 'u', 'd', 't') then concat('unknown op code: ', dbz_op)
                when dbz_op in ('c', 'r', 'u') and after_image is null then 'upsert without an after image'
            end,
            {{ inexact_number_problem() }}
        ) as problem,
        {{ bronze_lineage_columns() }}
    from fields
)

select * from final
