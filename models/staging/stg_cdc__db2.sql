{#
    IBM InfoSphere Data Replication for DB2 (Mia-Platform ingestion format): the Kafka key
    is a JSON object of the primary key columns; the value is the whole row (insert or
    update: an upsert) or null (a delete, by key). The message names no table, so the
    entity is the topic. It carries no position and no sequence: the only order is the
    Kafka order per key (a key always lands in one partition), so seq is the offset and
    the position the Kafka coordinates - a redelivery under a new offset is a new change.
#}
with

records as (
    {{ bronze_records('db2') }}
),

fields as (
    select
        *,
        json_object_keys(value) as value_fields,
        json_object_keys(key) as key_fields
    from records
),

final as (
    select
        source,
        format,
        topic as entity,
        case when value is null then 'delete' when value_fields is not null then 'upsert' end as op,
        case when key_fields is not null then key end as key_json,
        cast(null as string) as key_text,
        value as row_image,
        cast(null as map<string, struct<op: string, value: string, ts: bigint>>) as changes,
        array(`offset`) as seq,
        kafka_timestamp as event_ts,
        {{ kafka_position() }} as position,
        false as is_noop,
        coalesce(
            case
                when value is not null and value_fields is null then 'value is not a JSON object'
                when value is null and key_fields is null then 'delete without a key object'
            end,
            {{ inexact_number_problem() }}
        ) as problem,
        {{ bronze_lineage_columns() }}
    from fields
)

select * from final
