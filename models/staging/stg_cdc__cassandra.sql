{#
    DataStax CDC for Cassandra: no `before` image. Each `after` column is a cell
    {value, deletion_ts, set}; a null cell means unchanged, a cell with `deletion_ts` is a
    cell tombstone. `op` i (the document's own example uses c) inserts, u updates, d
    deletes the row; the null-payload record after a delete changes nothing.
    `source.ts_ms` is the write time in microseconds: gold resolves each cell by it.

    An insert also writes the row marker (`__row_marker__` below), which keeps an inserted
    row alive after all its cells are deleted; an update does not.
#}
with

records as (
    {{ bronze_records('cassandra') }}
),

{#
    Each value is parsed once for its fields and once for its `source` block, by
    json_tuple (macro json_tuple_field says why, and what it keeps exact).
#}
parsed_fields as (
    select *
    from records
        lateral view outer json_tuple(value, 'op', 'after', 'source') v as v_op, v_after, v_source
        lateral view outer json_tuple(
            v_source, 'keyspace', 'table', 'file', 'pos', 'position', 'ts_ms'
        ) s as s_keyspace, s_table, s_file, s_pos, s_position, s_ts_ms
),

fields as (
    select
        *,
        json_object_keys(value) as event_fields,
        json_object_keys(key) as key_columns,
        {{ json_tuple_field('v_op', 'value', '$.op') }} as cql_op,
        {{ json_tuple_field('v_after', 'value', '$.after') }} as after_cells,
        {{ json_tuple_field('s_keyspace', 'value', '$.source.keyspace') }} as keyspace,
        {{ json_tuple_field('s_table', 'value', '$.source.table') }} as table_name,
        {{ json_tuple_field('s_file', 'value', '$.source.file') }} as commitlog_file,
        coalesce(
            {{ json_tuple_field('s_pos', 'value', '$.source.pos') }},
            {{ json_tuple_field('s_position', 'value', '$.source.position') }}
        ) as commitlog_pos,
        try_cast({{ json_tuple_field('s_ts_ms', 'value', '$.source.ts_ms') }} as bigint)
            as write_ts_us
    from parsed_fields
),

cells as (
    select
        *,
        map_filter(
            from_json(after_cells, 'map<string, string>'),
            (col, cell) -> cell is not null and not array_contains(key_columns, col)
        ) as changed_cells
    from fields
),

final as (
    select
        source,
        format,
        concat_ws('.', keyspace, table_name) as entity,
        case when cql_op = 'd' then 'delete' when cql_op in ('i', 'c', 'u') then 'patch' end
            as op,
        key as key_json,
        cast(null as string) as key_text,
        cast(null as string) as row_image,
        case
            when cql_op in ('i', 'c', 'u') then map_concat(
                transform_values(
                    changed_cells,
                    (col, cell) -> named_struct(
                        'op',
                        case
                            when get_json_object(cell, '$.deletion_ts') is not null then 'delete'
                            else 'set'
                        end,
                        'value',
                        get_json_object(cell, '$.value'),
                        'ts',
                        write_ts_us
                    )
                ),
                case
                    when cql_op in ('i', 'c')
                        then map(
                            '__row_marker__',
                            named_struct(
                                'op', 'set', 'value', cast(null as string), 'ts', write_ts_us
                            )
                        )
                    else cast(map() as map<string, struct<op: string, value: string, ts: bigint>>)
                end
            )
        end as changes,
        array(
            coalesce(write_ts_us, 0),
            coalesce(try_cast(regexp_extract(commitlog_file, '(\\d+)\\.log$', 1) as bigint), 0),
            coalesce(try_cast(commitlog_pos as bigint), 0)
        ) as seq,
        timestamp_micros(write_ts_us) as event_ts,
        concat_ws(':', 'cassandra', commitlog_file, commitlog_pos) as position,
        value is null as is_noop,
        coalesce(
            case
                when value is null then null
                when event_fields is null then 'value is not a JSON object'
                when cql_op is null then 'no op field'
                when cql_op not in ('i', 'c', 'u', 'd') then concat('unknown op code: ', cql_op)
                when write_ts_us is null then 'no source.ts_ms write time'
                when commitlog_file is null or commitlog_pos is null
                    then 'no commit-log position (source.file, source.pos)'
                when key_columns is null then 'key is not a JSON object'
                when cql_op != 'd' and after_cells is not null and from_json(after_cells, 'map<string, string>') is null
                    then 'after is not an object of cells'
                when exists(
                    map_values(changed_cells),
                    cell -> json_object_keys(cell) is null
                ) then 'a Cassandra cell is not an object'
            end,
            {{ inexact_number_problem() }}
        ) as problem,
        {{ bronze_lineage_columns() }}
    from cells
)

select * from final
