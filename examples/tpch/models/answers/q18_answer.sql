-- TPC-H Q18 as the spec prints it: the maintained result, ordered and cut
{{ config(materialized='view') }}
select * from {{ ref('q18') }}
order by o_totalprice desc, o_orderdate
limit 100
