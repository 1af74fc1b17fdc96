{#
    Oracle GoldenGate (Mia-Platform ingestion format): `op_type` I / U upsert the `after`
    image, D deletes (`before` holds the old row). The Kafka key is ONE string, the key
    values joined by `_`: it goes to key_text as is and int_change_log__keyed splits it by
    the entity's declared key columns. `pos` is GoldenGate's own position (monotonic like
    an offset): it orders the changes and identifies redeliveries. Messages usually name
    no table (the full GoldenGate JSON has `table`): the entity is `table`, else the topic.
#}
with

records as (
    {{ bronze_records('goldengate') }}
),

{# Each value is parsed once for its fields (macro json_tuple_field says why). #}
envelope as (
    select *
    from records
        lateral view outer json_tuple(
            value, 'op_type', 'before', 'after', 'table', 'op_ts', 'pos'
        ) v as v_op_type, v_before, v_after, v_table, v_op_ts, v_pos
),

read_fields as (
    select
        *,
        {{ json_tuple_field('v_op_type', 'value', '$.op_type') }} as gg_op,
        {{ json_tuple_field('v_before', 'value', '$.before') }} as before_image,
        {{ json_tuple_field('v_after', 'value', '$.after') }} as after_image,
        {{ json_tuple_field('v_table', 'value', '$.table') }} as table_name,
        {{ json_tuple_field('v_op_ts', 'value', '$.op_ts') }} as op_ts,
        {{ json_tuple_field('v_pos', 'value', '$.pos') }} as pos_text
    from envelope
),

fields as (
    select
        *,
        json_object_keys(value) as value_fields,
        try_cast(pos_text as bigint) as pos
    from read_fields
),

final as (
    select
        source,
        format,
        coalesce(table_name, topic) as entity,
        case when gg_op in ('I', 'U') then 'upsert' when gg_op = 'D' then 'delete' end as op,
        cast(null as string) as key_json,
        key as key_text,
        case when gg_op = 'D' then before_image else after_image end as row_image,
        cast(null as map<string, struct<op: string, value: string, ts: bigint>>) as changes,
        array(coalesce(pos, 0)) as seq,
        coalesce(try_cast(op_ts as timestamp), kafka_timestamp) as event_ts,
        concat('goldengate:', pos_text) as position,
        value is null as is_noop,
        coalesce(
            case
                when value is null then null
                when value_fields is null then 'value is not a JSON object'
                when gg_op is null then 'no op field'
                when gg_op not in ('I', 'U', 'D') then concat('unknown op code: ', gg_op)
                when pos is null then 'no pos position'
                when gg_op in ('I', 'U') and after_image is null then 'upsert without an after image'
            end,
            {{ inexact_number_problem() }}
        ) as problem,
        {{ bronze_lineage_columns() }}
    from fields
)

select * from final
