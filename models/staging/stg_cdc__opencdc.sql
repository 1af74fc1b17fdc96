{#
    Conduit OpenCDC records: `operation` create / update / snapshot (initial load) upsert
    `payload.after`, delete deletes by key. `position`, `key` and `payload.before/after`
    are byte slices, written as base64 strings in JSON when they are not structured data:
    they are decoded where the bytes are UTF-8 text (a key or image that decodes to a JSON
    object is used as one; a key that is plain text goes to key_text). The entity is
    metadata `opencdc.collection` when the connector sets it, else the topic.

    seq is the Kafka offset alone. The position is opaque connector bytes (a string, not
    a number we may compare); `opencdc.createdAt` is optional and not unique within a
    transaction, and `opencdc.readAt` is only the time the connector read the change, in
    the same order Conduit produced the records. The Kafka order per key is therefore the
    best order available. The position still identifies the change, so a redelivery
    under a new offset keeps the same change_id.
#}
with

records as (
    {{ bronze_records('opencdc') }}
),

{#
    Each value is parsed once for its fields and once for its payload (macro
    json_tuple_field says why).
#}
envelope as (
    select *
    from records
        lateral view outer json_tuple(
            value, 'operation', 'position', 'key', 'payload', 'metadata'
        ) v as v_operation, v_position, v_key, v_payload, v_metadata
        lateral view outer json_tuple(v_payload, 'before', 'after') p as p_before, p_after
),

fields as (
    select
        *,
        json_object_keys(value) as value_fields,
        {{ json_tuple_field('v_operation', 'value', '$.operation') }} as cdc_op,
        {{ json_tuple_field('v_position', 'value', '$.position') }} as position_raw,
        {{ json_tuple_field('v_key', 'value', '$.key') }} as key_raw,
        {{ json_tuple_field('p_before', 'value', '$.payload.before') }} as before_raw,
        {{ json_tuple_field('p_after', 'value', '$.payload.after') }} as after_raw,
        from_json(
            {{ json_tuple_field('v_metadata', 'value', '$.metadata') }}, 'map<string, string>'
        ) as metadata
    from envelope
),

decoded as (
    select
        *,
        {{ decode_base64_text('position_raw') }} as position_text,
        {{ decode_base64_text('key_raw') }} as key_decoded,
        {{ decode_base64_text('before_raw') }} as before_decoded,
        {{ decode_base64_text('after_raw') }} as after_decoded
    from fields
),

images as (
    select
        *,
        case
            when json_object_keys(key_raw) is not null then key_raw
            when json_object_keys(key_decoded) is not null then key_decoded
        end as key_object,
        case
            when json_object_keys(before_raw) is not null then before_raw
            when json_object_keys(before_decoded) is not null then before_decoded
        end as before_image,
        case
            when json_object_keys(after_raw) is not null then after_raw
            when json_object_keys(after_decoded) is not null then after_decoded
        end as after_image,
        try_cast(metadata['opencdc.createdAt'] as bigint) as created_at_ns,
        try_cast(metadata['opencdc.readAt'] as bigint) as read_at_ns
    from decoded
),

decoded_checks as (
    {#
        The record's own checks (bronze_records) never saw inside base64: the same ones on
        the decoded JSON this model uses.
    #}
    {%- set decoded_key = 'case when key_object = key_decoded then key_object end' %}
    {%- set decoded_before = 'case when before_image = before_decoded then before_image end' %}
    {%- set decoded_after = 'case when after_image = after_decoded then after_image end' %}
    select
        *,
        {{ inexact_json_number(
            "concat_ws(' ', " ~ decoded_key ~ ", " ~ decoded_before ~ ", " ~ decoded_after ~ ")"
        ) }} as decoded_inexact_number,
        case
            when {{ names_a_field_twice(decoded_key) }} then 'key'
            when
                {{ names_a_field_twice(decoded_before) }}
                or {{ names_a_field_twice(decoded_after) }}
                then 'payload'
        end as decoded_field_twice
    from images
),

final as (
    select
        source,
        format,
        coalesce(metadata['opencdc.collection'], topic) as entity,
        case
            when cdc_op in ('create', 'update', 'snapshot') then 'upsert'
            when cdc_op = 'delete' then 'delete'
        end as op,
        key_object as key_json,
        case when key_object is null then coalesce(key_decoded, key_raw) end as key_text,
        case when cdc_op = 'delete' then before_image else after_image end as row_image,
        cast(null as map<string, struct<op: string, value: string, ts: bigint>>) as changes,
        array(`offset`) as seq,
        coalesce(
            timestamp_micros(div(created_at_ns, 1000)),
            timestamp_micros(div(read_at_ns, 1000)),
            kafka_timestamp
        ) as event_ts,
        case
            when position_raw is not null
                then concat('opencdc:', coalesce(position_text, position_raw))
            else {{ kafka_position() }}
        end as position,
        value is null as is_noop,
        coalesce(
            case
                when value is null then null
                when value_fields is null then 'value is not a JSON object'
                when cdc_op is null then 'no op field'
                when cdc_op not in ('create', 'update', 'snapshot', 'delete')
                    then concat('unknown op code: ', cdc_op)
                when cdc_op != 'delete' and after_image is null
                    then 'upsert without an after image (payload.after is not an object)'
                when decoded_field_twice is not null
                    then concat('field named twice inside the ', decoded_field_twice, ' (base64)')
            end,
            {{ inexact_number_problem('coalesce(inexact_number, decoded_inexact_number)') }}
        ) as problem,
        {{ bronze_lineage_columns() }}
    from decoded_checks
)

select * from final
