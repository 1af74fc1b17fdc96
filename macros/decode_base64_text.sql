{#
    decode_base64_text(text)

    The UTF-8 text that a base64 string holds, or null when it is not base64 or the bytes
    are not valid UTF-8. OpenCDC writes byte slices (position, raw key, raw payload) as
    base64 in JSON; this recovers them where they are text. Built-ins only:
    try_to_binary decodes, try_validate_utf8 drops byte strings that are not text.

    Arguments:
      text: a string expression, e.g. get_json_object(value, '$.position').
#}
{% macro decode_base64_text(text) -%}
    try_validate_utf8(cast(try_to_binary({{ text }}, 'base64') as string))
{%- endmacro %}
