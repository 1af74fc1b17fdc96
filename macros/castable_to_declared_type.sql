{#
    castable_to_declared_type(text, declared_type)

    True when the value text casts to the declared column type, by the rules gold casts
    with (pyspark_jobs/gold/typed_values.py cast_value): `string` and `json` take any
    text; `timestamp` takes epoch milliseconds (digits) or ISO text; every other type is
    Spark's try_cast. The type is data (config/sources.yml `columns`, published in
    lakehouse.entities), not known when the SQL is compiled, so the expression branches
    on it. Null text or an unknown type gives false.

    decimal(p,s) has no cast for a type chosen per row: the value is shifted s places
    (`<mantissa>e<exponent + s>`) and rounded to an integer exactly as the cast rounds
    (half up), which fits decimal(p,s) when it has at most p digits.

    Arguments:
      text: a string expression holding the value as silver keeps it, e.g. key_parts[i].
      declared_type: a string expression naming the declared type, e.g. column_types[k]
        ('bigint', 'timestamp', 'decimal(10,2)', ...).
#}
{% macro castable_to_declared_type(text, declared_type) -%}
    coalesce(
        case
            when {{ text }} is null then false
            when {{ declared_type }} in ('string', 'json') then true
            when {{ declared_type }} = 'timestamp' then
                case
                    {# timestamp_millis overflows past these bounds: it would fail, not cast. #}
                    when {{ text }} rlike '^-?[0-9]+$'
                        then try_cast({{ text }} as bigint)
                        between -9223372036854775 and 9223372036854775
                    else try_cast({{ text }} as timestamp) is not null
                end
            when {{ declared_type }} = 'boolean' then try_cast({{ text }} as boolean) is not null
            when {{ declared_type }} = 'tinyint' then try_cast({{ text }} as tinyint) is not null
            when {{ declared_type }} = 'smallint' then try_cast({{ text }} as smallint) is not null
            when {{ declared_type }} = 'int' then try_cast({{ text }} as int) is not null
            when {{ declared_type }} = 'bigint' then try_cast({{ text }} as bigint) is not null
            when {{ declared_type }} = 'float' then try_cast({{ text }} as float) is not null
            when {{ declared_type }} = 'double' then try_cast({{ text }} as double) is not null
            when {{ declared_type }} = 'date' then try_cast({{ text }} as date) is not null
            when {{ declared_type }} rlike '^decimal[(][ ]*[0-9]+[ ]*,[ ]*[0-9]+[ ]*[)]$' then
                {# A number below 10^38 at all (this also bounds the exponent), then its digits. #}
                try_cast({{ text }} as decimal(38, 0)) is not null
                and length(cast(abs(try_cast(
                    concat(
                        regexp_extract(trim({{ text }}), '^([+-]?[0-9.]*)([eE]([+-]?[0-9]+))?$', 1),
                        'e',
                        cast(
                            coalesce(
                                try_cast(
                                    regexp_extract(
                                        trim({{ text }}), '^([+-]?[0-9.]*)([eE]([+-]?[0-9]+))?$', 3
                                    ) as bigint
                                ),
                                0
                            )
                            + cast(regexp_extract({{ declared_type }}, ',[ ]*([0-9]+)', 1) as bigint)
                            as string
                        )
                    ) as decimal(38, 0)
                )) as string))
                <= cast(regexp_extract({{ declared_type }}, '[(][ ]*([0-9]+)', 1) as int)
            else false
        end,
        false
    )
{%- endmacro %}
