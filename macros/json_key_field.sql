{#
    json_key_field(json, path)

    One field of a JSON document as a variant, for a key object a staging model builds
    with to_json(named_struct(...)): a scalar becomes the text get_json_object gives (so
    the key reads exactly as text keys always did), while an object or array stays JSON,
    so that int_change_log__keyed sees a nested value and rejects it instead of taking
    its JSON text as a key value. Only a value that starts like a nested one ({, [) is
    parsed a second time.

    Arguments:
      json: a string expression holding a JSON document, e.g. value.
      path: a get_json_object path literal, e.g. '$.from.uid'.
#}
{% macro json_key_field(json, path) -%}
    case
        when left(get_json_object({{ json }}, '{{ path }}'), 1) in ('{', '[')
            then try_variant_get(try_parse_json({{ json }}), '{{ path }}')
        else cast(get_json_object({{ json }}, '{{ path }}') as variant)
    end
{%- endmacro %}
