{#
    add_missing_constraints()

    A post-hook: adds each check constraint the model declares that its Delta table lacks.
    A model's constraints are written only when dbt creates its table (with the create:
    check_constraints_at_create.sql), so a table built before a constraint was declared
    (a lake of an older version) would never get it.
    Delta checks the rows the table holds as it adds one (a row that breaks it fails the
    build and the constraint is not added); once present, it costs one `show
    tblproperties` per build.
#}
{% macro add_missing_constraints() %}
    {% if execute and model.config.get('contract', {}).get('enforced') %}
        {% set properties = run_query('show tblproperties ' ~ this).columns[0].values() %}
        {% for constraint in model.constraints if constraint.type == 'check' %}
            {# Delta keeps a constraint under its lower-cased name. #}
            {% if 'delta.constraints.' ~ constraint.name | lower not in properties %}
                {% do log('adding constraint ' ~ constraint.name ~ ' to ' ~ this, info=true) %}
                {% do run_query(
                    'alter table ' ~ this ~ ' add constraint ' ~ constraint.name
                    ~ ' check (' ~ constraint.expression ~ ')'
                ) %}
            {% endif %}
        {% endfor %}
    {% endif %}
{% endmacro %}
