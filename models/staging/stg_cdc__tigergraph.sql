{#
    TigerGraph CDC: one message per vertex, edge or vertex-type change.
    - `mid` = partition|timestamp|tid|index (4 parts, outside a transaction) or
      partition|timestamp|tid|split_index|index (5 parts, in a transaction); the changes
      order by seq [timestamp, tid, split_index (0 for 4 parts), index] and the mid is the
      position. A mid of any other shape is rejected.
    - vertex / edge `insert` is a patch: `content` maps each attribute to {op, value} with
      op Overwrite, Add, Max, Min, And, Or, IgnoreIfExisted, Minus or ReplaceOrAdd; gold
      applies them in seq order. `insert-only` creates the vertex only if absent.
      `delete` deletes it. A vertex-type `delete` truncates that vertex type.
    - Key convention (gold relies on it): a vertex is keyed {"uid"} in the entity named by
      its typename; an edge {"from_type", "from_uid", "to_type", "to_uid",
      "discriminator"} ('' when the edge type is not a multi-edge). An edge's row_image is
      {"hasreverseedge": true|false}, so gold knows whether a reverse edge exists. A uid
      that is a JSON object or array stays JSON in key_json: int_change_log__keyed
      rejects it (a key value must be scalar).
    Cascades (a vertex delete removes its edges, an edge insert creates a missing source
    vertex) send no messages: gold derives them.
#}
with

records as (
    {{ bronze_records('tigergraph') }}
),

{#
    Each value is parsed once for its fields, by json_tuple (macro json_tuple_field says
    why, and what it keeps exact).
#}
parsed_fields as (
    select *
    from records
        lateral view outer json_tuple(
            value, 'mid', 'operator', 'type', 'typename', 'content', 'timestamp', 'hasreverseedge'
        ) v as v_mid, v_operator, v_type, v_typename, v_content, v_timestamp, v_hasreverseedge
),

fields as (
    select
        *,
        json_object_keys(value) as value_fields,
        {{ json_tuple_field('v_mid', 'value', '$.mid') }} as mid,
        {{ json_tuple_field('v_operator', 'value', '$.operator') }} as operator,
        {{ json_tuple_field('v_type', 'value', '$.type') }} as message_type,
        {{ json_tuple_field('v_typename', 'value', '$.typename') }} as typename,
        {{ json_tuple_field('v_content', 'value', '$.content') }} as content,
        try_cast({{ json_tuple_field('v_timestamp', 'value', '$.timestamp') }} as bigint)
            as commit_ms,
        try_cast({{ json_tuple_field('v_hasreverseedge', 'value', '$.hasreverseedge') }} as boolean)
            as has_reverse_edge
    from parsed_fields
),

mids as (
    select
        *,
        transform(split(mid, '[|]', -1), part -> try_cast(part as bigint)) as mid_parts,
        from_json(content, 'map<string, string>') as attributes
    from fields
),

parsed as (
    select
        *,
        case
            when size(mid_parts) = 4 and not exists(mid_parts, p -> p is null)
                then array(mid_parts[1], mid_parts[2], 0L, mid_parts[3])
            when size(mid_parts) = 5 and not exists(mid_parts, p -> p is null)
                then slice(mid_parts, 2, 4)
        end as mid_seq,
        case
            when message_type in ('vertex', 'edge') and operator = 'insert' then 'patch'
            when message_type = 'vertex' and operator = 'insert-only' then 'insert_if_absent'
            when message_type in ('vertex', 'edge') and operator = 'delete' then 'delete'
            when message_type = 'vertex-type' and operator = 'delete' then 'truncate'
        end as change_op
    from mids
),

final as (
    select
        source,
        format,
        typename as entity,
        change_op as op,
        {# Key values keep an object or array as JSON: int_change_log__keyed rejects them. #}
        case
            when message_type = 'vertex'
                then to_json(named_struct('uid', {{ json_key_field('value', '$.uid') }}))
            when message_type = 'edge' then to_json(named_struct(
                'from_type', {{ json_key_field('value', '$.from.type') }},
                'from_uid', {{ json_key_field('value', '$.from.uid') }},
                'to_type', {{ json_key_field('value', '$.to.type') }},
                'to_uid', {{ json_key_field('value', '$.to.uid') }},
                'discriminator', coalesce(
                    {{ json_key_field('value', '$.discriminator') }}, cast('' as variant)
                )
            ))
        end as key_json,
        cast(null as string) as key_text,
        case
            when message_type = 'edge'
                then to_json(named_struct('hasreverseedge', coalesce(has_reverse_edge, false)))
        end as row_image,
        case
            when change_op in ('patch', 'insert_if_absent') then transform_values(
                coalesce(attributes, cast(map() as map<string, string>)),
                (attribute, change) -> named_struct(
                    'op', get_json_object(change, '$.op'),
                    'value', get_json_object(change, '$.value'),
                    'ts', cast(null as bigint)
                )
            )
        end as changes,
        coalesce(mid_seq, array(coalesce(commit_ms, 0), 0L, 0L, 0L)) as seq,
        coalesce(timestamp_millis(commit_ms), kafka_timestamp) as event_ts,
        concat('tigergraph:', mid) as position,
        value is null as is_noop,
        coalesce(
            case
                when value is null then null
                when value_fields is null then 'value is not a JSON object'
                when operator is null then 'no op field'
                when change_op is null
                    then concat('unknown op code: ', coalesce(message_type, '(no type)'), ' ', operator)
                when mid is null then 'no mid'
                when mid_seq is null then concat('mid does not have 4 or 5 numeric parts: ', mid)
                when
                    change_op in ('patch', 'insert_if_absent')
                    and content is not null
                    and attributes is null
                    then 'content is not an object of attribute changes'
                when change_op in ('patch', 'insert_if_absent') and exists(
                    map_values(attributes),
                    change -> coalesce(get_json_object(change, '$.op'), '') not in (
                        'Overwrite', 'Add', 'Max', 'Min', 'And', 'Or', 'IgnoreIfExisted', 'Minus',
                        'ReplaceOrAdd'
                    )
                ) then 'an attribute change has no known op'
            end,
            {{ inexact_number_problem() }}
        ) as problem,
        {{ bronze_lineage_columns() }}
    from parsed
)

select * from final
