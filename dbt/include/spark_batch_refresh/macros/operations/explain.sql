{#- dbt run-operation batch_refresh_explain --args '{model: name}'
    The mode the next refresh will use and why: upstreams, key paths, pushdowns, fallbacks. -#}
{% macro batch_refresh_explain(model) %}
  {% if execute %}
    {% set node = spark_batch_refresh__find_model(model) %}
    {#- render() resolves ref/source as a run would; config() renders to nothing here -#}
    {% set sql = render(node.raw_code) %}
    {% set raw = {} %}
    {% for name in spark_batch_refresh__config_names() %}
      {% do raw.update({name: node.config.get(name)}) %}
    {% endfor %}
    {% do raw.update({'_declared_keys': spark_batch_refresh__declared_keys(node)}) %}
    {{ print(adapter.batch_refresh_explain(node.name, node.unique_id, sql, raw,
                                           spark_batch_refresh__state_schema(),
                                           node.schema ~ '.' ~ node.alias)) }}
  {% endif %}
{% endmacro %}
