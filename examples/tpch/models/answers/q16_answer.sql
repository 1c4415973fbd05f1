-- TPC-H Q16 as the spec prints it: the maintained result, ordered
{{ config(materialized='view') }}
select * from {{ ref('q16') }}
order by supplier_cnt desc, p_brand, p_type, p_size
