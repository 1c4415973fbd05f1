-- TPC-H Q10 as the spec prints it: the maintained result, ordered and cut
{{ config(materialized='view') }}
select * from {{ ref('q10') }}
order by revenue desc
limit 20
