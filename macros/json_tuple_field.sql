{#
    json_tuple_field(column, json, path)

    A field that a staging model read with json_tuple, as get_json_object reads it.
    json_tuple reads all the fields it names in one parse of the text, where a
    get_json_object per field parses the text again for each (on the bench's Debezium
    records that was most of the staging view's time: docs/performance.md). The two
    read every field the same way (the text of strings, numbers written back as Spark
    reads them, nested values as compact JSON) except a name given twice in one object:
    get_json_object takes the first, json_tuple the last. For a record whose value
    names a field twice (`field_twice_within` = 'value', rejected anyway) or is too
    large to be checked for that (over 16 MiB: bronze_records), the field is read again
    with get_json_object, so the staged change, and the reason it is rejected, stay what
    they were field by field.

    Arguments:
      column: the column json_tuple gave the field, e.g. 'dbz_op'.
      json: the string expression json_tuple read (the value, or a part of it), e.g. 'event'.
      path: the field's get_json_object path within `json`, e.g. '$.op'.
#}
{% macro json_tuple_field(column, json, path) -%}
    case
        when field_twice_within = 'value' or octet_length(value) > 16777216
            then get_json_object({{ json }}, '{{ path }}')
        else {{ column }}
    end
{%- endmacro %}
