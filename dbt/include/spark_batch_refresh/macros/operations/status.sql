{#- dbt run-operation batch_refresh_status [--args '{history: 5, model: name}']
    Every batch_refresh model of the project: phase, last refresh, consumed versions, lag behind
    upstream, interval, next due, last outcome; then the last `history` runs of each. -#}
{% macro batch_refresh_status(history=5, model=none) %}
  {% if execute %}
    {% set models = spark_batch_refresh__project_models(model) %}
    {{ print(adapter.batch_refresh_status(spark_batch_refresh__state_schema(), models, history,
                                        model is not none)) }}
  {% endif %}
{% endmacro %}


{% macro spark_batch_refresh__project_models(only=none) %}
  {#- The batch_refresh models of the project (or the one named), as the status report needs them. -#}
  {% set wanted = [] if only is none else [spark_batch_refresh__find_model(only).unique_id] %}
  {% set models = [] %}
  {% for node in graph.nodes.values() | sort(attribute='unique_id') %}
    {% if node.resource_type == 'model' and node.config.materialized == 'batch_refresh'
          and (not wanted or node.unique_id in wanted) %}
      {% do models.append({
            'unique_id': node.unique_id, 'name': node.name,
            'relation': node.schema ~ '.' ~ (node.alias or node.name),
            'refresh_interval': node.config.get('refresh_interval'),
            'refresh_mode': node.config.get('refresh_mode')}) %}
    {% endif %}
  {% endfor %}
  {{ return(models) }}
{% endmacro %}


{#- dbt run-operation batch_refresh_history: every recorded run, oldest first -#}
{% macro batch_refresh_history() %}
  {% if execute %}
    {% set rows = adapter.batch_refresh_history(spark_batch_refresh__state_schema()) %}
    {% for row in rows %}
      {{ print(row['model_id'] ~ ' | ' ~ row['action'] ~ ' | ' ~ row['versions_from'] ~ ' -> '
               ~ row['versions_to'] ~ ' | +' ~ row['rows_inserted'] ~ ' ~' ~ row['rows_updated']
               ~ ' -' ~ row['rows_deleted'] ~ ' | ' ~ row['outcome']) }}
    {% endfor %}
  {% endif %}
{% endmacro %}


{#- dbt run-operation batch_refresh_unlock --args '{model: name, force: false}' -#}
{% macro batch_refresh_unlock(model, force=false) %}
  {% if execute %}
    {% set node = spark_batch_refresh__find_model(model) %}
    {{ print(adapter.batch_refresh_unlock(spark_batch_refresh__state_schema(), node.unique_id, force)) }}
  {% endif %}
{% endmacro %}


{% macro spark_batch_refresh__find_model(name) %}
  {% for node in graph.nodes.values() %}
    {% if node.resource_type == 'model' and (node.name == name or node.unique_id == name) %}
      {{ return(node) }}
    {% endif %}
  {% endfor %}
  {{ exceptions.raise_compiler_error("batch_refresh: no model named '" ~ name ~ "' in this project. Fix: pass the model's name, e.g. --args '{model: my_model}'.") }}
{% endmacro %}
