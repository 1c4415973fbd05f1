-- TPC-H Q22 as the spec prints it: the maintained result, ordered
{{ config(materialized='view') }}
select * from {{ ref('q22') }}
order by cntrycode
