{{ config(tblproperties={'delta.enableChangeDataFeed': 'true'}) }}
{#
    The unified change log: one row per distinct change of every source, in one schema.
    Append-only; a change redelivered under a new Kafka offset has the same change_id and
    is kept once (the first delivery).

    Replay (`lakehouse replay-rejects`, vars replay_rejects: true and optionally
    replay_sources: [names]): the bronze records that change_log_rejects holds are staged
    again with the current config, and those that now make valid changes land here; the
    anti join on change_id lands each change once however often they are replayed. dbt
    cannot see a ref behind is_incremental() when it parses, hence the depends_on line,
    only in a replay: otherwise the two silver models are independent and build at once
    (profiles.yml threads).
#}
{% if var('replay_rejects', false) -%}
-- depends_on: {{ ref('change_log_rejects') }}
{%- endif %}
with

keyed as (
    select * from {{ ref('int_change_log__batch') }}
    where
        reject_reason is null and not is_noop
        {% if is_incremental() %}
            and (
                {#
                    The batch model already keeps only the rows landed after the env's
                    bronze version; the anti join below keeps out what a failed build
                    appended after it. So with it set, the newest version the log holds
                    (a read of the whole log) is not needed.
                #}
                {% if not env_var('LAKEHOUSE_BATCH_AFTER_BRONZE_VERSION', '') %}
                    bronze_commit_version > (
                        select coalesce(max(lineage.bronze_commit_version), -1)
                        from {{ this }}
                    )
                {% else %}
                    true
                {% endif %}
                {% if var('replay_rejects', false) %}
                    or (source, lineage.topic, lineage.`partition`, lineage.`offset`) in (
                        select
                            source,
                            lineage.topic,
                            lineage.`partition`,
                            lineage.`offset`
                        from {{ ref('change_log_rejects') }}
                        {# Source names are identifiers (config validation): safe to quote. #}
                        {% if var('replay_sources', []) %}
                            where source in (
                                '{{ var('replay_sources') | join("', '") }}'
                            )
                        {% endif %}
                    )
                {% endif %}
            )
        {% endif %}
),

first_delivery as (
    select
        *,
        row_number() over (
            partition by change_id
            order by bronze_commit_version, lineage.topic, lineage.`partition`, lineage.`offset`
        ) as delivery
    from keyed
),

new_changes as (
    select first_delivery.*
    from first_delivery
    {% if is_incremental() %}
        {#
            A change id includes its source: on a batch of a few sources (the pipeline
            sets the variable to their quoted names, pyspark_jobs/silver/build.py) only
            their partitions of the log can hold it.
        #}
        left anti join (
            select change_id
            from {{ this }}
            {% set sources = env_var('LAKEHOUSE_BATCH_SOURCES', '') %}
            where {{ 'source in (' ~ sources ~ ')' if sources else 'true' }}
        ) as logged on first_delivery.change_id = logged.change_id
    {% endif %}
    where delivery = 1
),

final as (
    select
        change_id,
        source,
        format,
        entity,
        entity_kind,
        table_name,
        record_key,
        op,
        seq,
        event_ts,
        row_image,
        changes,
        position,
        lineage
    from new_changes
)

select * from final
