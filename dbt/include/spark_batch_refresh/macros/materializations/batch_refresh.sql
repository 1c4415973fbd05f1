{#-
  The batch_refresh materialization: hooks, grants and docs as dbt-spark's table
  materialization does them; the refresh itself (plan, lease, stage, merge, state) is Python
  (adapter.batch_refresh_run), so this file holds no refresh logic.
-#}
{% materialization batch_refresh, adapter='spark_batch_refresh', supported_languages=['sql'] %}
  {%- set identifier = model['alias'] -%}
  {%- set grant_config = config.get('grants') -%}
  {%- set existing = adapter.get_relation(database=database, schema=schema, identifier=identifier) -%}
  {%- set target_relation = api.Relation.create(identifier=identifier, schema=schema,
                                                database=database, type='table') -%}
  {%- if existing is none -%}
    {%- set target_kind = 'none' -%}
  {%- elif existing.type == 'table' and existing.is_delta -%}
    {%- set target_kind = 'delta' -%}
  {%- else -%}
    {%- set target_kind = 'other' -%}
  {%- endif -%}

  {{ run_hooks(pre_hooks) }}

  {%- if flags.EMPTY -%}
    {{ spark_batch_refresh__empty(model['name'], existing, target_relation, compiled_code) }}
    {{ run_hooks(post_hooks) }}
    {{ return({'relations': [target_relation]}) }}
  {%- endif -%}

  {%- set outcome = adapter.batch_refresh_run(
        model=model['name'],
        model_id=model['unique_id'],
        target=target_relation.render(),
        sql=compiled_code,
        raw_config=spark_batch_refresh__raw_config(),
        target_options=spark_batch_refresh__target_options(),
        target_kind=target_kind,
        state_schema=spark_batch_refresh__state_schema(),
        full_refresh=should_full_refresh(),
        force=var('batch_refresh_force', false),
        run_values=spark_batch_refresh__run_values()) -%}
  {%- set response = outcome[0] -%}
  {%- set result = outcome[1] -%}
  {% do store_result('main', response=response) %}
  {#- One info line through dbt's event system: what the run did and why (SQL is at debug). -#}
  {{ log("batch_refresh " ~ model['name'] ~ ": " ~ result['summary'], info=True) }}

  {% if result['action'] in ('backfill', 'replay', 'full') %}
    {% set should_revoke = should_revoke(existing, full_refresh_mode=(result['action'] == 'backfill')) %}
    {% do apply_grants(target_relation, grant_config, should_revoke) %}
    {% do persist_docs(target_relation, model) %}
  {% endif %}

  {{ run_hooks(post_hooks) }}

  {{ return({'relations': [target_relation]}) }}
{% endmaterialization %}


{% macro spark_batch_refresh__raw_config() -%}
  {#- Only the configs the refresh logic reads; Python validates them all at once. -#}
  {%- set raw = {} -%}
  {%- for name in spark_batch_refresh__config_names() -%}
    {%- do raw.update({name: config.get(name)}) -%}
  {%- endfor -%}
  {%- do raw.update({'_declared_keys': spark_batch_refresh__declared_keys(model)}) -%}
  {{ return(raw) }}
{%- endmacro %}


{% macro spark_batch_refresh__declared_keys(node) -%}
  {#- The keys the tests and constraints of the model and of its upstreams declare, read from
      the graph in Python (plan/tested_key.py). -#}
  {{ return(adapter.batch_refresh_declared_keys(graph, node) if execute else {}) }}
{%- endmacro %}


{% macro spark_batch_refresh__config_names() -%}
  {#- The list lives in Python (plan/config.py CONFIG_NAMES), next to the parsing of each. -#}
  {{ return(adapter.batch_refresh_config_names()) }}
{%- endmacro %}


{% macro spark_batch_refresh__target_options() -%}
  {#- dbt-spark's own clauses, so partition_by, clustered_by, buckets, location_root and
      persist_docs behave exactly as for its table materialization. -#}
  {%- set clauses -%}
    {{ options_clause() }}
    {{ partition_cols(label="partitioned by") }}
    {{ clustered_cols(label="clustered by") }}
    {{ location_clause() }}
    {{ comment_clause() }}
  {%- endset -%}
  {{ return(clauses | trim) }}
{%- endmacro %}


{% macro spark_batch_refresh__run_values() -%}
  {#- This invocation's values as a model may render them into audit columns: the refresh
      leaves them out of the model's fingerprint, so they do not rebuild it every run. -#}
  {{ return([run_started_at | string, run_started_at.isoformat(),
             run_started_at.strftime('%Y-%m-%d %H:%M:%S'), invocation_id]) }}
{%- endmacro %}


{% macro spark_batch_refresh__state_schema() -%}
  {#- Refresh state lives beside the target schema, out of the project's docs catalog. -#}
  {{ return(var('batch_refresh_state_schema', target.schema ~ '_batch_refresh')) }}
{%- endmacro %}


{% macro spark_batch_refresh__empty(name, existing, target_relation, sql) -%}
  {#- `--empty` (schema-only dry runs): refs read no rows, so a refresh would record upstream
      versions as consumed without their data. Create a missing target empty so downstream
      models compile against it, record no state, and leave an existing target alone: the
      next normal run backfills or replays as if `--empty` had never run. -#}
  {%- if existing is none -%}
    {%- call statement('main') -%}
      create table {{ target_relation.render() }} using delta {{ spark_batch_refresh__target_options() }}
      tblproperties ('delta.enableChangeDataFeed' = 'true') as {{ sql }}
    {%- endcall -%}
    {{ log("batch_refresh " ~ name ~ ": --empty: created the target without rows; no refresh state recorded", info=True) }}
  {%- else -%}
    {% do store_result('main', response='EMPTY: target left as it is') %}
    {{ log("batch_refresh " ~ name ~ ": --empty: target exists, left as it is; no refresh state recorded", info=True) }}
  {%- endif -%}
{%- endmacro %}
