{#- The correctness contract, checked on demand (dbt/adapters/spark_batch_refresh/verify.py):
    the target equals the SQL of its last refresh evaluated from scratch at the upstream
    versions that refresh consumed. -#}

{#- dbt run-operation batch_refresh_verify --args '{model: name}'
    Prints the verdict; fails with counts and example rows when they differ. -#}
{% macro batch_refresh_verify(model) %}
  {% if execute %}
    {% set node = spark_batch_refresh__find_model(model) %}
    {{ print(adapter.batch_refresh_verify(*spark_batch_refresh__verify_args(node))) }}
  {% endif %}
{% endmacro %}


{#- In schema.yml:  models: [{name: m, data_tests: [batch_refresh_consistent]}]
    Every row only in the target or only in the from-scratch result is one failure
    (`dbt test --store-failures` keeps them, with their side). -#}
{% test batch_refresh_consistent(model) %}
  {% if execute %}
    {% set node = spark_batch_refresh__node_of(model) %}
    {{ adapter.batch_refresh_consistency_sql(*spark_batch_refresh__verify_args(node)) }}
  {% else %}
    select 1 as batch_refresh_side where false
  {% endif %}
{% endtest %}


{% macro spark_batch_refresh__verify_args(node) %}
  {{ return([node.name, node.unique_id, node.schema ~ '.' ~ (node.alias or node.name),
             spark_batch_refresh__state_schema()]) }}
{% endmacro %}


{% macro spark_batch_refresh__node_of(relation) %}
  {#- The batch_refresh model a generic test's `model` relation is. -#}
  {% for node in graph.nodes.values() %}
    {% if node.resource_type == 'model' and node.schema == relation.schema
          and (node.alias or node.name) == relation.identifier %}
      {% if node.config.materialized != 'batch_refresh' %}
        {{ exceptions.raise_compiler_error("batch_refresh_consistent: model '" ~ node.name ~ "' is not materialized as batch_refresh. Fix: attach the test to batch_refresh models only.") }}
      {% endif %}
      {{ return(node) }}
    {% endif %}
  {% endfor %}
  {{ exceptions.raise_compiler_error("batch_refresh_consistent: no model of this project is " ~ relation ~ ".") }}
{% endmacro %}
