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

{#
    Each value is parsed once for the envelope's fields and once for its `source` block,
    by json_tuple (macro json_tuple_field says why, and what it keeps exact); the payload
    of a wrapped event once more.
#}
envelope as (
    select *
    from records
        lateral view outer json_tuple(
            value, 'schema', 'payload', 'op', 'after', 'before', 'source', 'ts_ms'
        ) v as v_schema, v_payload, v_op, v_after, v_before, v_source, v_ts_ms
),

events as (
    select
        *,
        {# The JSON converter with schemas on wraps each event as {"schema", "payload"}. #}
        {{ json_tuple_field('v_schema', 'value', '$.schema') }} is not null as wrapped,
        {{ json_tuple_field('v_payload', 'value', '$.payload') }} as payload
    from envelope
),

parsed_fields as (
    select
        *,
        case when wrapped then payload else value end as event,
        case when wrapped then p_op else v_op end as e_op,
        case when wrapped then p_after else v_after end as e_after,
        case when wrapped then p_before else v_before end as e_before,
        case when wrapped then p_ts_ms else v_ts_ms end as e_ts_ms
    from events
        lateral view outer json_tuple(
            case when wrapped then payload end, 'op', 'after', 'before', 'source', 'ts_ms'
        ) p as p_op, p_after, p_before, p_source, p_ts_ms
        lateral view outer json_tuple(
            case when wrapped then p_source else v_source end,
            'db', 'table', 'ts_ms', 'lsn', 'scn', 'pos', 'change_lsn', 'commit_lsn', 'file', 'row',
            'event_serial_no'
        ) s as s_db, s_table, s_ts_ms, s_lsn, s_scn, s_pos, s_change_lsn, s_commit_lsn, s_file,
        s_row, s_event_serial_no
),

read_fields as (
    select
        *,
        {{ json_tuple_field('e_op', 'event', '$.op') }} as dbz_op,
        {{ json_tuple_field('e_after', 'event', '$.after') }} as after_image,
        {{ json_tuple_field('e_before', 'event', '$.before') }} as before_image,
        {{ json_tuple_field('e_ts_ms', 'event', '$.ts_ms') }} as event_ts_text,
        {{ json_tuple_field('s_db', 'event', '$.source.db') }} as source_db,
        {{ json_tuple_field('s_table', 'event', '$.source.table') }} as source_table,
        {{ json_tuple_field('s_ts_ms', 'event', '$.source.ts_ms') }} as source_ts_text,
        {{ json_tuple_field('s_lsn', 'event', '$.source.lsn') }} as source_lsn,
        {{ json_tuple_field('s_scn', 'event', '$.source.scn') }} as source_scn,
        {{ json_tuple_field('s_pos', 'event', '$.source.pos') }} as source_pos,
        {{ json_tuple_field('s_change_lsn', 'event', '$.source.change_lsn') }} as source_change_lsn,
        {{ json_tuple_field('s_commit_lsn', 'event', '$.source.commit_lsn') }} as source_commit_lsn,
        {{ json_tuple_field('s_file', 'event', '$.source.file') }} as source_file,
        {{ json_tuple_field('s_row', 'event', '$.source.row') }} as source_row,
        {{ json_tuple_field('s_event_serial_no', 'event', '$.source.event_serial_no') }}
            as source_event_serial_no
    from parsed_fields
),

fields as (
    select
        *,
        json_object_keys(event) as event_fields,
        try_cast(source_ts_text as bigint) as source_ts_ms,
        try_cast(event_ts_text as bigint) as event_ts_ms,
        coalesce(
            try_cast(source_lsn as bigint),
            try_cast(source_scn as bigint),
            try_cast(source_pos as bigint)
        ) as source_position,
        concat_ws(
            ':',
            source_lsn,
            source_change_lsn,
            source_commit_lsn,
            source_scn,
            source_file,
            source_pos,
            source_row,
            source_event_serial_no
        ) as source_coordinates
    from read_fields
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
