{#
    json_tuple_field(column, json, path)

    A field that a staging model read with json_tuple, as get_json_object reads it.
    json_tuple reads all the fields it names in one parse of the text, where a
    get_json_object per field parses the text again for each (on the bench's Debezium
    records that was most of the staging view's time: docs/performance.md). The two
    read every field the same way (the text of strings, numbers written back as Spark
    reads them, nested values as compact JSON) except in two cases, where the field is
    read again with get_json_object so that the staged change, and the reason it is
    rejected, stay what they were field by field (the first two), or a field of a change
    rejected anyway (the third):
    - a name given twice in one object: get_json_object takes the first, json_tuple the
      last. Read again when the value names a field twice (`field_twice_within` =
      'value', rejected anyway) or is too large to be checked for that
      (too_large_to_check: over 16 MiB);
    - a field read through a json_tuple of its parent's text (`path` below the top, or
      `json` not the value itself): a parent that is a string holding object text, e.g.
      "source": "{\"db\": \"a\"}", gives the same text as an object would, and json_tuple
      reads into it where get_json_object finds no field. Read again when the value may
      hold a string that starts like an object (`object_text_in_a_string`, from
      bronze_records);
    - a field read through a json_tuple of its parent's text when the value holds a
      number Spark's JSON functions write back changed (`inexact_number`, from
      bronze_records): the parent's text is written back with 1e400 as the string
      "Infinity", which json_tuple then reads without its quotes, where get_json_object
      gives "Infinity" with them. Such a change is rejected for that number anyway; read
      again so that its fields stay what they were.

    Arguments:
      column: the column json_tuple gave the field, e.g. 'dbz_op'.
      json: the string expression json_tuple read (the value, or a part of it), e.g. 'event'.
      path: the field's get_json_object path within `json`, e.g. '$.op'.
#}
{% macro json_tuple_field(column, json, path) -%}
    {%- set through_a_parent = json != 'value' or path.count('.') > 1 -%}
    case
        when
            field_twice_within = 'value'
            or {{ too_large_to_check('value') }}
            {%- if through_a_parent %}
            or object_text_in_a_string
            or inexact_number is not null
            {%- endif %}
            then get_json_object({{ json }}, '{{ path }}')
        else {{ column }}
    end
{%- endmacro %}
