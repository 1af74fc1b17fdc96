{#
    A model's check constraints written with the table that dbt creates, in its one commit.

    dbt-spark creates a model with an enforced contract and then adds each check constraint
    with its own `alter table ... add constraint`: a Delta commit and a read of the rows
    per constraint, 0.5 s each in a warm session, 2.2 s for change_log's four on every new
    lake. Delta takes them as table properties (`delta.constraints.<name>`) in the
    `create table ... as select` as well, and checks each row of that first write against
    them: a row that breaks one fails the create and leaves no table (a `create or
    replace` leaves the old one). So the properties carry them and dbt-spark's step that
    adds them is left with nothing to do. A table created before a constraint was declared
    still gets it from the post-hook `add_missing_constraints`.
#}

{% macro check_constraint_properties() %}
    {% set properties = {} %}
    {% set contract = config.get('contract') %}
    {% if contract and contract.enforced
        and config.get('materialized') in ['table', 'incremental'] %}
        {% for constraint in model.constraints if constraint.type == 'check' and constraint.name %}
            {# Delta keeps a constraint under its lower-cased name. #}
            {% do properties.update({
                'delta.constraints.' ~ constraint.name | lower: constraint.expression
            }) %}
        {% endfor %}
    {% endif %}
    {{ return(properties) }}
{% endmacro %}

{# dbt-spark's clause, with the model's check constraints added to its properties. #}
{% macro spark__tblproperties_clause() -%}
    {%- set tblproperties = dict(config.get('tblproperties') or {}) -%}
    {%- do tblproperties.update(check_constraint_properties()) -%}
    {%- if tblproperties %}
        tblproperties (
        {%- for prop in tblproperties -%}
            '{{ prop }}' = '{{ tblproperties[prop] | replace("\\", "\\\\") | replace("'", "\\'") }}'
            {%- if not loop.last %}, {% endif %}
        {%- endfor %}
        )
    {%- endif %}
{%- endmacro %}

{# dbt-spark's step, left with the check constraints the create did not write. #}
{% macro spark__alter_table_add_constraints(relation, constraints) %}
    {% set written = check_constraint_properties() %}
    {% for constraint in constraints if constraint.type == 'check' and not is_incremental() %}
        {% set name = constraint.name or 'check_' ~ local_md5(constraint.expression ~ loop.index) %}
        {% if 'delta.constraints.' ~ name | lower not in written %}
            {% call statement() %}
                alter table {{ relation }} add constraint {{ name }} check ({{ constraint.expression }});
            {% endcall %}
        {% endif %}
    {% endfor %}
{% endmacro %}
