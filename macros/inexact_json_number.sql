{#
    inexact_json_number(json)

    The first number in a JSON text that silver cannot keep exactly, or null. Spark's JSON
    functions (get_json_object, from_json) read a number with a fraction or an exponent
    as a double and write that double back: 1.50 becomes 1.5 (the same value), but
    12.345678901234567890123 becomes 12.345678901234567, 1e400 the string "Infinity" and
    1e-400 0.0. A change holding such a number is rejected with it instead of reaching gold
    altered. Integers are kept digit for digit, however long, so they never count.

    Escapes, then strings (field names included), are cut out first, each by a regex that
    needs no backtracking, so a number's digits inside a string never count and a 5 MB
    string costs one pass.

    Arguments:
      json: a string expression holding JSON text, e.g. value.
#}
{% macro inexact_json_number(json) -%}
    get(
        filter(
            regexp_extract_all(
                regexp_replace(regexp_replace({{ json }}, '\\\\.', ''), '"[^"]*+"', ''),
                '-?[0-9]++(?:[.][0-9]++)?[eE][-+]?[0-9]++|-?[0-9]++[.][0-9]++',
                0
            ),
            n -> not coalesce(
                {{ json_number_normal_form('n') }}
                = {{ json_number_normal_form("get_json_object(concat('[', n, ']'), '$[0]')") }},
                false
            )
        ),
        0
    )
{%- endmacro %}


{#
    json_number_normal_form(text)

    A JSON number's value as text, equal for two numbers exactly when their values are:
    the sign, the significant digits without leading or trailing zeros, and the power of
    ten of the first one (1.50, 15e-1 and 0.15E1 all give '15e1'; any zero gives '0').
    Null for text that is not a JSON number (Infinity) or whose exponent overflows.

    Arguments:
      text: a string expression holding one number, e.g. '1.5E-7'.
#}
{% macro json_number_normal_form(text) -%}
    {%- set pattern = "'^(-?)([0-9]+)(?:[.]([0-9]+))?(?:[eE]([-+]?[0-9]+))?$'" -%}
    {%- set sign = "regexp_extract(" ~ text ~ ", " ~ pattern ~ ", 1)" -%}
    {%- set whole = "regexp_extract(" ~ text ~ ", " ~ pattern ~ ", 2)" -%}
    {%- set digits = "concat(" ~ whole ~ ", regexp_extract(" ~ text ~ ", " ~ pattern ~ ", 3))" -%}
    {%- set significant = "regexp_replace(" ~ digits ~ ", '^0+', '')" -%}
    {%- set exponent = "regexp_extract(" ~ text ~ ", " ~ pattern ~ ", 4)" -%}
    case
        when not {{ text }} rlike {{ pattern }} then null
        when regexp_replace({{ significant }}, '0+$', '') = '' then '0'
        else concat(
            {{ sign }},
            regexp_replace({{ significant }}, '0+$', ''),
            'e',
            cast(
                case when {{ exponent }} = '' then 0 else try_cast({{ exponent }} as bigint) end
                + length({{ whole }}) - (length({{ digits }}) - length({{ significant }}))
                as string
            )
        )
    end
{%- endmacro %}


{#
    inexact_number_problem(number)

    A staging model's reject reason for a change whose record holds a number silver cannot
    keep exactly, null otherwise; staging models fall back to it after their own format
    checks.

    Arguments:
      number: the number found, by default the `inexact_number` column of bronze_records
        (the record's value and key as they arrived). A model that decodes text inside
        them (a base64 payload, a JSON string holding JSON) passes its own check of that
        text first, e.g. 'coalesce(inexact_number, decoded_inexact_number)'.
#}
{% macro inexact_number_problem(number='inexact_number') -%}
    case
        when {{ number }} is not null then concat(
            'number ', {{ number }}, ' cannot be kept exactly: Spark reads it as ',
            coalesce(get_json_object(concat('[', {{ number }}, ']'), '$[0]'), 'nothing')
        )
    end
{%- endmacro %}
