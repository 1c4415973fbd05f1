{#- The scripted upstream change of `make demo`: inserts, updates and deletes on the seeds. -#}
{% macro apply_demo_changes() %}
  {% set orders = ref('orders') %}
  {% do run_query("insert into " ~ orders ~ " values (41, 2, 'placed', 320.00, '2026-11-01 09:00:00'), (42, 5, 'placed', 12.50, '2026-11-01 10:00:00')") %}
  {% do run_query("update " ~ orders ~ " set status = 'shipped', amount = amount + 300 where order_id in (1, 2, 3)") %}
  {% do run_query("update " ~ orders ~ " set status = 'cancelled' where order_id = 4") %}
  {% do run_query("delete from " ~ orders ~ " where order_id in (5, 6)") %}
  {{ print("applied: 2 inserts, 4 updates (1 into 'cancelled'), 2 deletes on " ~ orders) }}
{% endmacro %}
