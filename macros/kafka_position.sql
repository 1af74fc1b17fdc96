{#
    kafka_position()

    The record's Kafka coordinates as a position string, for formats whose messages carry
    no position of their own (a redelivery under a new offset then cannot be recognised).
#}
{% macro kafka_position() -%}
    concat_ws(':', 'kafka', topic, cast(`partition` as string), cast(`offset` as string))
{%- endmacro %}
