{#
    Mia-Platform Fast Data projection-update events (pr-update), two versions:
    - v1 (Real-Time Updater): value.operationType INSERT / UPDATE / UPSERT / DELETE,
      operationTimestamp, projectionName (the entity), primaryKeys, before, after and
      __internal__kafkaInfo, the Kafka coordinates of the ingestion message behind it.
    - v2 (Projection Storer): value.operation {type, timestamp}, storageNamespace (the
      entity), primaryKeys, before, after.
    INSERT / UPDATE / UPSERT upsert `after`; DELETE deletes by key (`before` kept when
    present). The key is the Kafka message key (JSON object of the primary keys).
    seq [operation timestamp in ms, Kafka offset of this event].

    Position: v1 names the ingestion record (__internal__kafkaInfo topic:partition:offset),
    so a redelivered pr-update keeps its change_id. v2 carries the same coordinates in
    the Kafka *headers* (headers.context.ingestion), which are not part of the Kafka value
    and are not kept in bronze: v2 falls back to this record's own Kafka coordinates.
#}
with

records as (
    {{ bronze_records('pr_update') }}
),

{#
    Each value is parsed once for its fields, once for its v2 `operation` and once for
    its v1 Kafka coordinates (macro json_tuple_field says why).
#}
envelope as (
    select *
    from records
        lateral view outer json_tuple(
            value, 'operation', 'operationType', 'operationTimestamp', 'projectionName',
            'storageNamespace', 'before', 'after', '__internal__kafkaInfo'
        ) v as v_operation, v_operation_type, v_operation_ts, v_projection_name,
        v_storage_namespace, v_before, v_after, v_kafka_info
        lateral view outer json_tuple(v_operation, 'type', 'timestamp') o as o_type, o_timestamp
        lateral view outer json_tuple(
            v_kafka_info, 'topic', 'partition', 'offset'
        ) k as k_topic, k_partition, k_offset
),

fields as (
    select
        *,
        json_object_keys(value) as value_fields,
        json_object_keys(key) as key_fields,
        coalesce(
            {{ json_tuple_field('o_type', 'value', '$.operation.type') }},
            {{ json_tuple_field('v_operation_type', 'value', '$.operationType') }}
        ) as operation_type,
        coalesce(
            {{ json_tuple_field('o_timestamp', 'value', '$.operation.timestamp') }},
            {{ json_tuple_field('v_operation_ts', 'value', '$.operationTimestamp') }}
        ) as operation_ts_text,
        coalesce(
            {{ json_tuple_field('v_projection_name', 'value', '$.projectionName') }},
            {{ json_tuple_field('v_storage_namespace', 'value', '$.storageNamespace') }}
        ) as projection,
        {{ json_tuple_field('v_before', 'value', '$.before') }} as before_image,
        {{ json_tuple_field('v_after', 'value', '$.after') }} as after_image,
        {{ json_tuple_field('k_topic', 'value', '$.__internal__kafkaInfo.topic') }}
            as ingestion_topic,
        {{ json_tuple_field('k_partition', 'value', '$.__internal__kafkaInfo.partition') }}
            as ingestion_partition,
        {{ json_tuple_field('k_offset', 'value', '$.__internal__kafkaInfo.offset') }}
            as ingestion_offset
    from envelope
),

typed as (
    select
        *,
        try_cast(operation_ts_text as timestamp) as operation_ts
    from fields
),

final as (
    select
        source,
        format,
        projection as entity,
        case
            when operation_type in ('INSERT', 'UPDATE', 'UPSERT') then 'upsert'
            when operation_type = 'DELETE' then 'delete'
        end as op,
        case when key_fields is not null then key end as key_json,
        cast(null as string) as key_text,
        case when operation_type = 'DELETE' then before_image else after_image end as row_image,
        cast(null as map<string, struct<op: string, value: string, ts: bigint>>) as changes,
        array(coalesce(unix_millis(operation_ts), 0), `offset`) as seq,
        coalesce(operation_ts, kafka_timestamp) as event_ts,
        case
            when ingestion_topic is not null and ingestion_offset is not null
                then concat_ws(
                    ':', 'pr-update', ingestion_topic, ingestion_partition, ingestion_offset
                )
            else {{ kafka_position() }}
        end as position,
        value is null as is_noop,
        coalesce(
            case
                when value is null then null
                when value_fields is null then 'value is not a JSON object'
                when operation_type is null then 'no op field'
                when operation_type not in ('INSERT', 'UPDATE', 'UPSERT', 'DELETE')
                    then concat('unknown op code: ', operation_type)
                when operation_ts is null then 'no operation timestamp'
                when operation_type != 'DELETE' and after_image is null
                    then 'upsert without an after image'
            end,
            {{ inexact_number_problem() }}
        ) as problem,
        {{ bronze_lineage_columns() }}
    from typed
)

select * from final
