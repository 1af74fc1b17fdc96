{#
    The early Debezium design's entity-patches stream: one request patches one entity of
    a collection with `ops`, JSON-patch-like documents {op: add / remove / replace, path,
    value} on slash-separated paths into the nested document (e.g. phone/home). A request
    may be split into `parts`.

    Each op becomes its own change-log row, in order (posexplode keeps the index):
    op 'patch' with changes = {path: {op, value, ts: null}}, keyed {"entity": <entity id>}
    in the entity named by `collection`. seq [begun, request, part, op_index] orders them
    per entity; the position client:request:part:op_index identifies a redelivery.
    A `remove` of the root path ("", or "/" as RFC 6901 writes it) deletes the entity: op
    'delete', no changes. Ops after it in the same message patch a new, empty document
    (their own rows, later in seq), as gold folds a delete then a patch.
    A patch applies whole or not at all: when one op of a message is invalid, every op of
    that message is rejected with the first op's problem. A null value (compaction)
    changes nothing.
#}
with

records as (
    {{ bronze_records('debezium_patch') }}
),

{#
    Each value is parsed once for the request's fields (macro json_tuple_field says why);
    the entity id is read apart (json_key_field), as a key.
#}
envelope as (
    select *
    from records
        lateral view outer json_tuple(
            value, 'collection', 'clientid', 'request', 'part', 'begun', 'ops'
        ) v as v_collection, v_clientid, v_request, v_part, v_begun, v_ops
),

fields as (
    select
        *,
        json_object_keys(value) as value_fields,
        {{ json_tuple_field('v_collection', 'value', '$.collection') }} as collection,
        {{ json_key_field('value', '$.entity') }} as entity_id,
        {# An entity id is a JSON string or number; get_json_object reads true and "true" alike. #}
        get_json_object(value, '$.entity') in ('true', 'false')
        and schema_of_variant(try_variant_get(try_parse_json(value), '$.entity')) = 'BOOLEAN'
            as entity_is_boolean,
        {{ json_tuple_field('v_clientid', 'value', '$.clientid') }} as client_id,
        try_cast({{ json_tuple_field('v_request', 'value', '$.request') }} as bigint) as request,
        try_cast({{ json_tuple_field('v_part', 'value', '$.part') }} as bigint) as part,
        try_cast({{ json_tuple_field('v_begun', 'value', '$.begun') }} as bigint) as begun_ms,
        from_json({{ json_tuple_field('v_ops', 'value', '$.ops') }}, 'array<string>') as ops
    from envelope
),

ops as (
    {# outer: a request without ops still yields a row, to be rejected. #}
    select
        fields.*,
        patch.op_index,
        patch.op_doc,
        get_json_object(patch.op_doc, '$.op') as patch_op,
        get_json_object(patch.op_doc, '$.path') as patch_path,
        get_json_object(patch.op_doc, '$.value') as patch_value,
        get_json_object(patch.op_doc, '$.path') in ('', '/') as on_root,
        {# An op written as a JSON string is JSON read a second time: check its numbers. #}
        {{ inexact_json_number('patch.op_doc') }} as op_inexact_number
    from fields
        lateral view outer posexplode(ops) patch as op_index, op_doc
),

checked as (
    select
        *,
        case
            when value is null then null
            when value_fields is null then 'value is not a JSON object'
            when entity_is_boolean
                then concat(
                    'key column entity is a JSON boolean, not a string or number: ',
                    get_json_object(value, '$.entity')
                )
            when ops is null or size(ops) = 0 then 'no ops'
            when patch_op is null then 'no op field'
            when patch_op not in ('add', 'remove', 'replace')
                then concat('unknown op code: ', patch_op)
            when patch_path is null then 'patch op without a path'
            when on_root and patch_op != 'remove'
                then concat(patch_op, ' of the root path (only remove applies to the whole entity)')
            when client_id is null or request is null then 'no request id (clientid, request)'
            {# An op written as a JSON string: the record's own check never saw inside it. #}
            when {{ names_a_field_twice('op_doc') }} then 'field named twice inside an op'
        end as op_problem
    from ops
),

whole_patch as (
    select
        *,
        {# The message's first problem, on every one of its ops. #}
        first_value(op_problem, true) over (
            partition by source, topic, `partition`, `offset`
            order by op_index
            rows between unbounded preceding and unbounded following
        ) as patch_problem,
        {# A patch applies whole or not at all, so one op's number rejects every op. #}
        first_value(op_inexact_number, true) over (
            partition by source, topic, `partition`, `offset`
            order by op_index
            rows between unbounded preceding and unbounded following
        ) as patch_inexact_number
    from checked
),

final as (
    select
        source,
        format,
        collection as entity,
        case
            when patch_op = 'remove' and on_root then 'delete'
            when patch_op in ('add', 'remove', 'replace') then 'patch'
        end as op,
        {# An entity id that is a JSON object or array stays JSON: it is rejected as a key. #}
        case
            when entity_id is not null then to_json(named_struct('entity', entity_id))
        end as key_json,
        cast(null as string) as key_text,
        cast(null as string) as row_image,
        case
            when patch_op in ('add', 'remove', 'replace') and not on_root then map(
                patch_path,
                named_struct('op', patch_op, 'value', patch_value, 'ts', cast(null as bigint))
            )
        end as changes,
        array(
            coalesce(begun_ms, 0), coalesce(request, 0), coalesce(part, 0),
            cast(coalesce(op_index, 0) as bigint)
        ) as seq,
        coalesce(timestamp_millis(begun_ms), kafka_timestamp) as event_ts,
        case
            when client_id is not null and request is not null
                then concat_ws(
                    ':', 'entity-patch', client_id, cast(request as string),
                    cast(coalesce(part, 1) as string), cast(op_index as string)
                )
            else concat_ws(':', {{ kafka_position() }}, cast(op_index as string))
        end as position,
        value is null as is_noop,
        coalesce(
            patch_problem,
            {{ inexact_number_problem('coalesce(inexact_number, patch_inexact_number)') }}
        ) as problem,
        {{ bronze_lineage_columns() }}
    from whole_patch
)

select * from final
