{#
    bronze_records(format)

    The bronze rows of one CDC format with their lineage, for a staging model to parse.
    `bronze_commit_version` is the Delta commit that landed the row (row tracking), the
    watermark silver's incremental models read from. `inexact_number` is the first number
    in the value or the key that silver cannot keep exactly (inexact_json_number).
    `field_twice_within` is 'value' or 'key' when that JSON object names a field twice in
    some object at any depth (Spark's variant parser refuses duplicate names; its JSON
    functions would read the first): int_change_log__keyed rejects the change, after its
    own checks, which name a twice-named field of the key or the row image. A text over
    16 MiB is not looked at (the variant parser has a size limit).
    `object_text_in_a_string` is true when the value may hold a string whose text starts
    like a JSON object (json_tuple_field reads such a value field by field); computed
    here once per record, not once per field read.

    Arguments:
      format: the `format` value of the sources to read, e.g. 'debezium'.
#}
{% macro bronze_records(format) -%}
    select
        source,
        format,
        topic,
        `partition`,
        `offset`,
        kafka_timestamp,
        key,
        value,
        coalesce({{ inexact_json_number('value') }}, {{ inexact_json_number('key') }})
            as inexact_number,
        case
            when {{ names_a_field_twice('value') }} then 'value'
            when {{ names_a_field_twice('key') }} then 'key'
        end as field_twice_within,
        {{ string_starts_like_an_object('value') }} as object_text_in_a_string,
        ingested_at,
        batch_id,
        _metadata.row_commit_version as bronze_commit_version
    from {{ source('bronze', 'cdc_raw') }}
    where format = '{{ format }}'
{%- endmacro %}


{#
    names_a_field_twice(json)

    True when `json` is a JSON object that names a field twice in some object at any
    depth (Spark's variant parser refuses duplicate names: try_parse_json is null), false
    otherwise, also for text that is not a JSON object or is over 16 MiB (the variant
    parser's size limit).

    Arguments:
      json: a string expression holding JSON text, e.g. value.
#}
{% macro names_a_field_twice(json) -%}
    (
        not {{ too_large_to_check(json) }}
        and json_object_keys({{ json }}) is not null
        and try_parse_json({{ json }}) is null
    )
{%- endmacro %}


{#
    too_large_to_check(json)

    True when `json` is over 16 MiB, the variant parser's size limit: names_a_field_twice
    cannot look at such a text, so a model that relies on its answer (json_tuple_field)
    must not rely on it there.

    Arguments:
      json: a string expression holding JSON text, e.g. value.
#}
{% macro too_large_to_check(json) -%}
    (octet_length({{ json }}) > 16777216)
{%- endmacro %}


{#
    string_starts_like_an_object(json)

    True when the JSON text `json` may hold a string whose text, once read, starts with
    `{` (after whitespace): a quote, then whitespace or escapes, then `{` or its \u
    escape. It errs on the side of true (any escape counts as whitespace), which only
    costs a second read. Spark's JSON functions accept single-quoted strings, so `'`
    counts as a quote.

    Arguments:
      json: a string expression holding JSON text, e.g. value.
#}
{% macro string_starts_like_an_object(json) -%}
    coalesce({{ json }} rlike '["\']([ \t\n\r]|\\\\u[0-9a-fA-F]{4}|\\\\[^u])*(\\{|\\\\u007[bB])', false)
{%- endmacro %}
