"""fivetran/dbt_quickbooks as the probe runs it (tests/functional/probe_real_projects.py):
`qb_` keyless, `qbk_` with the package's key tests (MODEL_TESTS)."""
from __future__ import annotations

from tests.functional.probes.common import C, O, P, PR, dbt_last_day, ported, surrogate

# Session 73: fivetran/dbt_quickbooks (v1.9) as a Spark user ports it: one connector
# (`source_relation` ''), its default vars (no tax lines, home currency '', no ordinal seed)
# but `using_invoice_bundle: false` (no bundle staging), the bill and invoice double entries
# and the general ledger unioned over them as dbt_utils.union_relations compiles (each
# relation's columns cast to its types, `_dbt_source_relation` the quoted relation),
# dbt.date_trunc, dbt.last_day (Spark's dateadd with its assert_not_null checks) and
# generate_surrogate_key spelled out, group_by(n) as ordinals, the ledger's date spine fixed to
# 2024 (the package runs it from the ledger's first to last month), the intermediate models
# (ephemeral in the package) built as models. Staging keeps the package's base -> fields
# (fill_staging_columns: absent columns as typed NULLs) -> final casts. Accounts come from
# customers (the type by id % 8, so payable, receivable, income and expense accounts differ),
# items from products, bills from orders (cancelled ones `_fivetran_deleted`) and bill lines
# from payments (order_id the bill, void ones expensed by item), invoices from customers
# (blocked ones deleted) and invoice lines from orders (customer_id the invoice, status the
# line's detail type). Dates are ids in days (invoices twice theirs), so no two ledger rows of
# one account tie in the running balance's order. Keyless, and again (`qbk_`) with the
# package's unique + not_null on the ledger's unique_id and the source package's
# unique_combination_of_columns on the staging models ((<id>, source_relation) on the headers,
# (<id>, index, source_relation) on the lines).
_QB_AT = "date'2024-01-01'"


QB_STAGING = {
 "stg_account": f"""
with base as (
    select id, cast(id * 10 as string) as account_number, id % 3 = 0 as sub_account,
        case when id % 3 = 0 then id - 1 end as parent_account_id, name,
        element_at(array('Accounts Receivable', 'Accounts Payable', 'Income', 'Expense', 'Bank', 'Equity',
                         'Cost of Goods Sold', 'Other Current Liability'), cast(id % 8 + 1 as int)) as account_type,
        element_at(array('AccountsReceivable', 'AccountsPayable', 'SalesOfProductIncome', 'OtherMiscellaneousServiceCost',
                         'Checking', 'OpeningBalanceEquity', 'SuppliesMaterialsCogs', 'OtherCurrentLiabilities'),
                   cast(id % 8 + 1 as int)) as account_sub_type,
        case when region is not null then
            element_at(array('Asset', 'Liability', 'Revenue', 'Expense', 'Asset', 'Equity', 'Expense', 'Liability'),
                       cast(id % 8 + 1 as int)) end as classification,
        cast(id * 25 as decimal(18, 2)) as balance, cast(id * 50 as decimal(18, 2)) as balance_with_sub_accounts,
        tier <> 'blocked' as active, cast(date_add({_QB_AT}, id) as timestamp) as created_at,
        case when id % 16 = 0 then 'EUR' else 'USD' end as currency_id, region as description,
        concat(region, ':', name) as fully_qualified_name, cast(date_add({_QB_AT}, id + 1) as timestamp) as updated_at
    from {C}
),
account as (
    select
        id, account_number, sub_account, parent_account_id, name, account_type, account_sub_type, classification,
        balance, balance_with_sub_accounts, active, created_at, currency_id, description, fully_qualified_name,
        updated_at, cast(null as boolean) as _fivetran_deleted
        , cast('' as string) as source_relation
    from base
),
final as (
    select
        cast(id as string) as account_id,
        cast(account_number as string) as account_number,
        sub_account as is_sub_account,
        cast(parent_account_id as string) as parent_account_id,
        name,
        account_type,
        account_sub_type,
        classification,
        balance,
        balance_with_sub_accounts,
        active as is_active,
        created_at,
        currency_id,
        description,
        fully_qualified_name,
        updated_at,
        source_relation,
        _fivetran_deleted
    from account
)
select *
from final
where not coalesce(_fivetran_deleted, false)""",
 "stg_item": f"""
with base as (
    select id, true as active, cast(date_add({_QB_AT}, id) as timestamp) as created_at,
        (id % 5) * 8 + 2 as income_account_id,
        case when category = 'cat0' then (id % 5) * 8 + 4 end as asset_account_id,
        (id % 5) * 8 + 6 as expense_account_id, concat('item', id) as name, category as description,
        cast(price as decimal(18, 2)) as unit_price, case when id > 5 then id - 5 end as parent_item_id,
        category is null as _fivetran_deleted
    from {PR}
),
fields as (
    select
        id, active, created_at, income_account_id, asset_account_id, expense_account_id, name, description,
        cast(null as string) as stock_keeping_unit, cast(null as decimal(18, 2)) as purchase_cost,
        cast(null as boolean) as taxable, cast(null as string) as type, unit_price,
        cast(null as decimal(18, 2)) as quantity_on_hand, cast(null as boolean) as track_quantity_on_hand,
        cast(null as string) as fully_qualified_name, cast(null as timestamp) as inventory_start_date,
        parent_item_id, _fivetran_deleted
        , cast('' as string) as source_relation
    from base
),
final as (
    select
        cast(id as string) as item_id,
        active as is_active,
        created_at,
        cast(income_account_id as string) as income_account_id,
        cast(asset_account_id as string) as asset_account_id,
        cast(expense_account_id as string) as expense_account_id,
        name,
        description,
        stock_keeping_unit,
        purchase_cost,
        taxable,
        type,
        unit_price,
        quantity_on_hand,
        track_quantity_on_hand,
        fully_qualified_name,
        inventory_start_date,
        cast(parent_item_id as string) as parent_item_id,
        source_relation,
        _fivetran_deleted
    from fields
)
select *
from final
where not coalesce(_fivetran_deleted, false)""",
 "stg_bill": f"""
with base as (
    select id, amount as balance, id as doc_number,
        case when product_id % 4 = 0 then 'EUR' else 'USD' end as currency_id, product_id as department_id,
        cast(date_add({_QB_AT}, id + 30) as timestamp) as due_date,
        cast(date_add({_QB_AT}, id) as timestamp) as transaction_date,
        cast(date_add({_QB_AT}, id) as timestamp) as created_at,
        cast(date_add({_QB_AT}, id + 2) as timestamp) as updated_at,
        case when product_id % 4 = 0 then cast(1.1 as decimal(18, 6)) end as exchange_rate,
        (customer_id % 5) * 8 + 1 as payable_account_id, amount as total_amount, customer_id as vendor_id,
        status as private_note, status = 'cancelled' as _fivetran_deleted
    from {O}
),
fields as (
    select
        id, balance, doc_number, currency_id, department_id, due_date, transaction_date, created_at, updated_at,
        exchange_rate, payable_account_id, total_amount, vendor_id, private_note, _fivetran_deleted
        , cast('' as string) as source_relation
    from base
),
final as (
    select
        cast(id as string) as bill_id,
        balance,
        cast(doc_number as string) as doc_number,
        currency_id,
        cast(department_id as string) as department_id,
        cast( date_trunc('day', due_date) as date) as due_date,
        cast( date_trunc('day', transaction_date) as date) as transaction_date,
        created_at,
        updated_at,
        exchange_rate,
        cast(payable_account_id as string) as payable_account_id,
        total_amount,
        cast(vendor_id as string) as vendor_id,
        private_note,
        _fivetran_deleted,
        source_relation
    from fields
)
select *
from final
where not coalesce(_fivetran_deleted, false)""",
 "stg_bill_line": f"""
with base as (
    select order_id as bill_id, id as index,
        case when method <> 'void' then (id % 5) * 8 + 3 end as account_expense_account_id,
        case method when 'card' then 'C1' when 'bank' then 'C2' end as account_expense_class_id,
        case when method = 'card' then order_id % 40 + 1 end as account_expense_customer_id,
        case when method = 'void' then order_id % 12 + 1 end as item_expense_item_id,
        case when method = 'void' and amount > 25 then 'C3' end as item_expense_class_id,
        amount, method as description
    from {P}
),
fields as (
    select
        bill_id, index, account_expense_account_id, account_expense_class_id,
        cast(null as string) as account_expense_billable_status, cast(null as string) as account_expense_tax_code_id,
        account_expense_customer_id, item_expense_item_id, cast(null as int) as item_expense_customer_id,
        cast(null as string) as item_expense_billable_status, item_expense_class_id,
        cast(null as decimal(18, 2)) as item_expense_quantity, cast(null as decimal(18, 2)) as item_expense_unit_price,
        amount, description
        , cast('' as string) as source_relation
    from base
),
final as (
    select
        cast(bill_id as string) as bill_id,
        index,
        cast(account_expense_account_id as string) as account_expense_account_id,
        cast(account_expense_class_id as string) as account_expense_class_id,
        account_expense_billable_status,
        account_expense_tax_code_id,
        cast(account_expense_customer_id as string) as account_expense_customer_id,
        cast(item_expense_item_id as string) as item_expense_item_id,
        cast(item_expense_customer_id as string) as item_expense_customer_id,
        item_expense_billable_status,
        cast(item_expense_class_id as string) as item_expense_class_id,
        item_expense_quantity,
        item_expense_unit_price,
        amount,
        description,
        source_relation
    from fields
)
select *
from final""",
 "stg_invoice": f"""
with base as (
    select id, id % 7 as balance, concat('INV-', id) as doc_number, id % 7 as total_amount,
        case region when 'eu' then 'EUR' when 'us' then 'USD' when 'apac' then 'USD' end as currency_id,
        case when region = 'eu' then cast(1.08 as decimal(18, 6)) end as exchange_rate,
        cast(date_add({_QB_AT}, id * 2) as timestamp) as transaction_date, id as customer_id,
        cast(date_add({_QB_AT}, id * 2 + 30) as timestamp) as due_date,
        case when id % 4 <> 0 then concat('K', id % 4) end as class_id,
        cast(date_add({_QB_AT}, id * 2) as timestamp) as created_at,
        cast(date_add({_QB_AT}, id * 2 + 1) as timestamp) as updated_at,
        tier = 'blocked' as _fivetran_deleted
    from {C}
),
fields as (
    select
        id, balance, doc_number, total_amount, currency_id, cast(null as int) as department_id,
        cast(null as int) as deposit_to_account_id, exchange_rate, transaction_date, customer_id,
        cast(null as int) as billing_address_id, cast(null as int) as shipping_address_id,
        cast(null as string) as delivery_type, due_date, class_id, created_at, updated_at, _fivetran_deleted
        , cast('' as string) as source_relation
    from base
),
final as (
    select
        cast(id as string) as invoice_id,
        balance,
        cast(doc_number as string) as doc_number,
        total_amount,
        currency_id,
        cast(department_id as string) as department_id,
        cast(deposit_to_account_id as string) as deposit_to_account_id,
        exchange_rate,
        cast( date_trunc('day', transaction_date) as date) as transaction_date,
        cast(customer_id as string) as customer_id,
        cast(billing_address_id as string) as billing_address_id,
        shipping_address_id,
        delivery_type,
        cast( date_trunc('day', due_date) as date) as due_date,
        cast(class_id as string) as class_id,
        created_at,
        updated_at,
        _fivetran_deleted,
        source_relation
    from fields
)
select *
from final
where not coalesce(_fivetran_deleted, false)""",
 "stg_invoice_line": f"""
with base as (
    select customer_id as invoice_id, id as index, amount,
        case when status = 'paid' then (product_id % 5) * 8 + 2 end as sales_item_account_id,
        product_id as sales_item_item_id,
        case when status = 'shipped' then 'K9' end as sales_item_class_id,
        case when status = 'new' then (customer_id % 5) * 8 + 5 end as discount_account_id,
        case status when 'new' then 'DiscountLineDetail' when 'cancelled' then 'SubTotalLineDetail'
                    when 'paid' then 'SalesItemLineDetail' end as detail_type,
        status as description, case when amount >= 100 then (product_id % 5) * 8 + 2 end as account_id,
        product_id as item_id
    from {O}
),
fields as (
    select
        invoice_id, index, amount, sales_item_account_id, sales_item_item_id, sales_item_class_id,
        cast(null as int) as sales_item_quantity, cast(null as decimal(18, 2)) as sales_item_unit_price,
        discount_account_id, detail_type, cast(null as string) as discount_class_id, description,
        cast(null as int) as quantity, cast(null as int) as bundle_quantity, cast(null as int) as bundle_id,
        account_id, item_id
        , cast('' as string) as source_relation
    from base
),
final as (
    select
        cast(invoice_id as string) as invoice_id,
        index,
        amount,
        cast(sales_item_account_id as string) as sales_item_account_id,
        cast(sales_item_item_id as string) as sales_item_item_id,
        cast(sales_item_class_id as string) as sales_item_class_id,
        cast(sales_item_quantity as float) as sales_item_quantity,
        sales_item_unit_price,
        cast(discount_account_id as string) as discount_account_id,
        detail_type,
        cast(discount_class_id as string) as discount_class_id,
        description,
        cast(quantity as float) as quantity,
        bundle_quantity,
        cast(bundle_id as string) as bundle_id,
        cast(account_id as string) as account_id,
        cast(item_id as string) as item_id,
        source_relation
    from fields
)
select *
from final""",
}
QB_MARTS = {
 "int_account_classifications": """
with accounts as (
    select *
    from {{ ref('PFX_stg_account') }}
),
classification_fix as (
    select
        account_id,
        source_relation,
        account_number,
        is_sub_account,
        parent_account_id,
        name,
        account_type,
        account_sub_type,
        balance,
        balance_with_sub_accounts,
        is_active,
        created_at,
        currency_id,
        description,
        fully_qualified_name,
        updated_at,
        cast(case when classification is not null
            then classification
            when classification is null and account_type in ('Bank', 'Other Current Asset', 'Fixed Asset', 'Other Asset', 'Accounts Receivable')
                then 'Asset'
            when classification is null and account_type = 'Equity'
                then 'Equity'
            when classification is null and account_type in ('Expense', 'Other Expense', 'Cost of Goods Sold')
                then 'Expense'
            when classification is null and account_type in ('Accounts Payable', 'Credit Card', 'Long Term Liability', 'Other Current Liability')
                then 'Liability'
            when classification is null and account_type in ('Income', 'Other Income')
                then 'Revenue'
                    end as string) as classification
    from accounts
),
classification_add as (
    select
        *,
        case when classification in ('Liability', 'Equity')
            then -1
        when classification = 'Asset'
            then 1
            else null
                end as multiplier,
        cast(case when classification in ('Asset', 'Liability', 'Equity')
            then 'balance_sheet'
            else 'income_statement'
                end as string) as financial_statement_helper,
        cast(case when classification in ('Asset', 'Expense')
            then 'debit'
            else 'credit'
                end as string) as transaction_type
    from classification_fix
),
adjusted_balances as (
    select
        *,
        (balance * multiplier) as adjusted_balance
    from classification_add
),
final as (
    select
        adjusted_balances.*,
        case when adjusted_balances.is_sub_account
            then parent_accounts.account_number
            else adjusted_balances.account_number
                end as parent_account_number,
        case when adjusted_balances.is_sub_account
            then parent_accounts.fully_qualified_name
            else adjusted_balances.fully_qualified_name
                end as parent_account_name
    from adjusted_balances
    left join accounts as parent_accounts
        on parent_accounts.account_id = adjusted_balances.parent_account_id
        and parent_accounts.source_relation = adjusted_balances.source_relation
)
select *
from final""",
 "int_bill_double_entry": """
with bills as (
    select *
    from {{ ref('PFX_stg_bill') }}
),
bill_lines as (
    select *
    from {{ ref('PFX_stg_bill_line') }}
),
items as (
    select
        item.*,
        parent.expense_account_id as parent_expense_account_id,
        parent.income_account_id as parent_income_account_id
    from {{ ref('PFX_stg_item') }} item
    left join {{ ref('PFX_stg_item') }} parent
        on item.parent_item_id = parent.item_id
        and item.source_relation = parent.source_relation
),
bill_join as (
    select
        bills.bill_id as transaction_id,
        bills.source_relation,
        bill_lines.index,
        bills.transaction_date,
        bill_lines.amount,
        case
            when bills.currency_id = ''
                then bill_lines.amount
            else bill_lines.amount * coalesce(bills.exchange_rate, 1)
        end as converted_amount,
        coalesce(bill_lines.account_expense_account_id,items.asset_account_id, items.expense_account_id, items.parent_expense_account_id, items.expense_account_id, items.parent_income_account_id, items.income_account_id) as paid_to_account_id,
        bills.payable_account_id,
        coalesce(bill_lines.account_expense_customer_id, bill_lines.item_expense_customer_id) as customer_id,
        coalesce(bill_lines.item_expense_class_id, bill_lines.account_expense_class_id) as class_id,
        bills.vendor_id,
        bills.department_id,
        bills.created_at,
        bills.updated_at
    from bills
    inner join bill_lines
        on bills.bill_id = bill_lines.bill_id
        and bills.source_relation = bill_lines.source_relation
    left join items
        on bill_lines.item_expense_item_id = items.item_id
        and bill_lines.source_relation = items.source_relation
),
final as (
    select
        transaction_id,
        source_relation,
        index,
        transaction_date,
        customer_id,
        vendor_id,
        amount,
        converted_amount,
        paid_to_account_id as account_id,
        class_id,
        department_id,
        created_at,
        updated_at,
        cast('debit' as string) as transaction_type,
        cast('bill' as string) as transaction_source
    from bill_join
    union all
    select
        transaction_id,
        source_relation,
        index,
        transaction_date,
        customer_id,
        vendor_id,
        amount,
        converted_amount,
        payable_account_id as account_id,
        class_id,
        department_id,
        created_at,
        updated_at,
        cast('credit' as string) as transaction_type,
        cast('bill' as string) as transaction_source
    from bill_join
)
select *
from final""",
 "int_invoice_double_entry": """
with invoices as (
    select *
    from {{ ref('PFX_stg_invoice') }}
),
invoice_lines as (
    select *
    from {{ ref('PFX_stg_invoice_line') }}
),
items as (
    select
        item.*,
        parent.income_account_id as parent_income_account_id
    from {{ ref('PFX_stg_item') }} item
    left join {{ ref('PFX_stg_item') }} parent
        on item.parent_item_id = parent.item_id
        and item.source_relation = parent.source_relation
),
accounts as (
    select *
    from {{ ref('PFX_stg_account') }}
),
ar_accounts as (
    select
        account_id,
        currency_id,
        source_relation
    from accounts
    where account_type = 'Accounts Receivable'
        and is_active
        and not is_sub_account
),
invoice_join as (
    select
        invoices.invoice_id as transaction_id,
        invoices.source_relation,
        invoice_lines.index,
        invoices.transaction_date as transaction_date,
        invoice_lines.amount as amount,
        invoice_lines.amount *
        (case when invoices.currency_id = ''
            then 1
            else coalesce(invoices.exchange_rate, 1)
        end) as converted_amount,
        cast(case when invoice_lines.detail_type is not null then invoice_lines.detail_type
            when coalesce(invoice_lines.account_id, invoice_lines.sales_item_account_id, items.parent_income_account_id, items.income_account_id) is not null then 'SalesItemLineDetail'
            when invoice_lines.discount_account_id is not null then 'DiscountLineDetail'
            when coalesce(invoice_lines.account_id, invoice_lines.sales_item_account_id, items.parent_income_account_id, items.income_account_id, invoice_lines.discount_account_id) is null then 'NoAccountMapping'
        end as string) as invoice_line_transaction_type,
        coalesce(invoice_lines.account_id, invoice_lines.sales_item_account_id, items.income_account_id, invoice_lines.discount_account_id) as account_id,
        coalesce(invoice_lines.sales_item_class_id, invoice_lines.discount_class_id, invoices.class_id) as class_id,
        invoices.customer_id,
        invoices.department_id,
        invoices.created_at,
        invoices.updated_at,
        invoices.currency_id
    from invoices
    inner join invoice_lines
        on invoices.invoice_id = invoice_lines.invoice_id
        and invoices.source_relation = invoice_lines.source_relation
    left join items
        on coalesce(invoice_lines.sales_item_item_id, invoice_lines.item_id) = items.item_id
        and invoice_lines.source_relation = items.source_relation
),
invoice_filter as (
    select *
    from invoice_join
    where invoice_line_transaction_type not in ('SubTotalLineDetail','NoAccountMapping')
),
final as (
    select
        transaction_id,
        invoice_filter.source_relation,
        index,
        transaction_date,
        customer_id,
        cast(null as string) as vendor_id,
        amount,
        converted_amount,
        account_id,
        class_id,
        department_id,
        created_at,
        updated_at,
        cast(case when invoice_line_transaction_type = 'DiscountLineDetail' then 'debit'
            else 'credit'
        end as string) as transaction_type,
        cast(case when invoice_line_transaction_type = 'DiscountLineDetail' then 'invoice discount'
            else 'invoice'
        end as string) as transaction_source
    from invoice_filter
    union all
    select
        transaction_id,
        invoice_filter.source_relation,
        index,
        transaction_date,
        customer_id,
        cast(null as string) as vendor_id,
        amount,
        converted_amount,
        ar_accounts.account_id,
        class_id,
        department_id,
        created_at,
        updated_at,
        cast(case when invoice_line_transaction_type = 'DiscountLineDetail' then 'credit'
            else 'debit'
        end as string) as transaction_type,
        cast(case when invoice_line_transaction_type = 'DiscountLineDetail' then 'invoice discount'
            else 'invoice'
        end as string) as transaction_source
    from invoice_filter
    left join ar_accounts
        on ar_accounts.currency_id = invoice_filter.currency_id
        and ar_accounts.source_relation = invoice_filter.source_relation
)
select *
from final""",
 "general_ledger": """
with unioned_models as (

        (
            select
                cast('{{ ref('PFX_int_bill_double_entry') }}' as string) as _dbt_source_relation,
                UNION_COLUMNS
            from {{ ref('PFX_int_bill_double_entry') }}
        )

        union all

        (
            select
                cast('{{ ref('PFX_int_invoice_double_entry') }}' as string) as _dbt_source_relation,
                UNION_COLUMNS
            from {{ ref('PFX_int_invoice_double_entry') }}
        )
),
gl_union as (
    select transaction_id,
        source_relation,
        index,
        transaction_date,
        customer_id,
        vendor_id,
        amount,
        converted_amount,
        account_id,
        class_id,
        department_id,
        transaction_type,
        transaction_source,
        created_at,
        updated_at
    from unioned_models
),
accounts as (
    select *
    from {{ ref('PFX_int_account_classifications') }}
),
adjusted_gl as (
    select
        SURROGATE_GL
            as unique_id,
        gl_union.transaction_id,
        gl_union.source_relation,
        gl_union.index as transaction_index,
        gl_union.transaction_date,
        cast(date_trunc('month', gl_union.transaction_date) as date) as period_first_day,
        LAST_DAY_GL as period_last_day,
        gl_union.customer_id,
        gl_union.vendor_id,
        gl_union.amount,
        gl_union.account_id,
        gl_union.class_id,
        gl_union.department_id,
        accounts.account_number,
        accounts.name as account_name,
        accounts.is_sub_account,
        accounts.parent_account_number,
        accounts.parent_account_name,
        accounts.account_type,
        accounts.account_sub_type,
        accounts.financial_statement_helper,
        accounts.balance as account_current_balance,
        accounts.classification as account_class,
        gl_union.transaction_type,
        gl_union.transaction_source,
        accounts.transaction_type as account_transaction_type,
        gl_union.created_at,
        gl_union.updated_at,
        case when accounts.transaction_type = gl_union.transaction_type
            then gl_union.amount
            else gl_union.amount * -1
        end as adjusted_amount,
        case when accounts.transaction_type = gl_union.transaction_type
            then gl_union.converted_amount
            else gl_union.converted_amount * -1
        end as adjusted_converted_amount
    from gl_union
    left join accounts
        on gl_union.account_id = accounts.account_id
        and gl_union.source_relation = accounts.source_relation
),
final as (
    select
        *,
        sum(adjusted_amount) over (partition by account_id, class_id
            order by transaction_date, transaction_id, transaction_index rows unbounded preceding) as running_balance,
        sum(adjusted_converted_amount) over (partition by account_id, class_id
            order by transaction_date, transaction_id, transaction_index rows unbounded preceding) as running_converted_balance
    from adjusted_gl
)
select *
from final""",
 "int_general_ledger_date_spine": """
with spine as (
    select explode(sequence(date'2024-01-01', date'2024-12-01', interval 1 month)) as date_month
),
general_ledger as (
    select *
    from {{ ref('PFX_general_ledger') }}
),
date_spine as (
    select
        cast(date_trunc('year', date_month) as date) as date_year,
        cast(date_trunc('month', date_month) as date) as period_first_day,
        LAST_DAY_SPINE as period_last_day,
        row_number() over (order by cast(date_trunc('month', date_month) as date)) as period_index
    from spine
),
final as (
    select distinct
        general_ledger.account_id,
        general_ledger.source_relation,
        general_ledger.account_number,
        general_ledger.account_name,
        general_ledger.is_sub_account,
        general_ledger.parent_account_number,
        general_ledger.parent_account_name,
        general_ledger.account_type,
        general_ledger.account_sub_type,
        general_ledger.account_class,
        general_ledger.financial_statement_helper,
        general_ledger.class_id,
        date_spine.date_year,
        date_spine.period_first_day,
        date_spine.period_last_day,
        date_spine.period_index
    from general_ledger
    cross join date_spine
)
select *
from final""",
 "int_general_ledger_balances": """
with general_ledger as (
    select *
    from {{ ref('PFX_general_ledger') }}
),
gl_accounting_periods as (
    select *
    from {{ ref('PFX_int_general_ledger_date_spine') }}
),
gl_period_balance as (
    select
        account_id,
        source_relation,
        account_number,
        account_name,
        is_sub_account,
        parent_account_number,
        parent_account_name,
        account_type,
        account_sub_type,
        financial_statement_helper,
        account_class,
        class_id,
        cast(date_trunc('year', transaction_date) as date) as date_year,
        cast(date_trunc('month', transaction_date) as date) as date_month,
        sum(adjusted_amount) as period_balance,
        sum(adjusted_converted_amount) as period_converted_balance
    from general_ledger
    group by 1,2,3,4,5,6,7,8,9,10,11,12,13,14
),
gl_cumulative_balance as (
    select
        *,
        case when financial_statement_helper = 'balance_sheet'
            then sum(period_balance) over (partition by account_id, class_id
            order by date_month, account_id, class_id rows unbounded preceding)
            else 0
                end as cumulative_balance,
        case when financial_statement_helper = 'balance_sheet'
            then sum(period_converted_balance) over (partition by account_id, class_id
            order by date_month, account_id, class_id rows unbounded preceding)
            else 0
                end as cumulative_converted_balance
    from gl_period_balance
),
gl_beginning_balance as (
    select
        account_id,
        source_relation,
        account_number,
        account_name,
        is_sub_account,
        parent_account_number,
        parent_account_name,
        account_type,
        account_sub_type,
        financial_statement_helper,
        account_class,
        class_id,
        date_year,
        date_month,
        period_balance as period_net_change,
        case when financial_statement_helper = 'balance_sheet'
            then (cumulative_balance - period_balance)
            else 0
                end as period_beginning_balance,
        cumulative_balance as period_ending_balance,
        period_converted_balance as period_net_converted_change,
        case when financial_statement_helper = 'balance_sheet'
            then (cumulative_converted_balance - period_converted_balance)
            else 0
                end as period_beginning_converted_balance,
        cumulative_converted_balance as period_ending_converted_balance
    from gl_cumulative_balance
),
gl_patch as (
    select
        coalesce(gl_beginning_balance.account_id, gl_accounting_periods.account_id) as account_id,
        coalesce(gl_beginning_balance.source_relation, gl_accounting_periods.source_relation) as source_relation,
        coalesce(gl_beginning_balance.account_number, gl_accounting_periods.account_number) as account_number,
        coalesce(gl_beginning_balance.account_name, gl_accounting_periods.account_name) as account_name,
        coalesce(gl_beginning_balance.is_sub_account, gl_accounting_periods.is_sub_account) as is_sub_account,
        coalesce(gl_beginning_balance.parent_account_number, gl_accounting_periods.parent_account_number) as parent_account_number,
        coalesce(gl_beginning_balance.parent_account_name, gl_accounting_periods.parent_account_name) as parent_account_name,
        coalesce(gl_beginning_balance.account_type, gl_accounting_periods.account_type) as account_type,
        coalesce(gl_beginning_balance.account_sub_type, gl_accounting_periods.account_sub_type) as account_sub_type,
        coalesce(gl_beginning_balance.account_class, gl_accounting_periods.account_class) as account_class,
        coalesce(gl_beginning_balance.class_id, gl_accounting_periods.class_id) as class_id,
        coalesce(gl_beginning_balance.financial_statement_helper, gl_accounting_periods.financial_statement_helper) as financial_statement_helper,
        coalesce(gl_beginning_balance.date_year, gl_accounting_periods.date_year) as date_year,
        gl_accounting_periods.period_first_day,
        gl_accounting_periods.period_last_day,
        gl_accounting_periods.period_index,
        gl_beginning_balance.period_net_change,
        gl_beginning_balance.period_beginning_balance,
        gl_beginning_balance.period_ending_balance,
        case when gl_beginning_balance.period_beginning_balance is null and period_index = 1
            then 0
            else gl_beginning_balance.period_beginning_balance
                end as period_beginning_balance_starter,
        case when gl_beginning_balance.period_ending_balance is null and period_index = 1
            then 0
            else gl_beginning_balance.period_ending_balance
                end as period_ending_balance_starter,
        gl_beginning_balance.period_net_converted_change,
        gl_beginning_balance.period_beginning_converted_balance,
        gl_beginning_balance.period_ending_converted_balance,
        case when gl_beginning_balance.period_beginning_converted_balance is null and period_index = 1
            then 0
            else gl_beginning_balance.period_beginning_converted_balance
                end as period_beginning_converted_balance_starter,
        case when gl_beginning_balance.period_ending_converted_balance is null and period_index = 1
            then 0
            else gl_beginning_balance.period_ending_converted_balance
                end as period_ending_converted_balance_starter
    from gl_accounting_periods
    left join gl_beginning_balance
        on gl_beginning_balance.account_id = gl_accounting_periods.account_id
            and gl_beginning_balance.source_relation = gl_accounting_periods.source_relation
            and gl_beginning_balance.date_month = gl_accounting_periods.period_first_day
            and gl_beginning_balance.date_year = gl_accounting_periods.date_year
            and coalesce(gl_beginning_balance.class_id, '0') = coalesce(gl_accounting_periods.class_id, '0')
),
gl_value_partition as (
    select
        *,
        sum(case when period_ending_balance_starter is null
            then 0
            else 1
                end) over (order by source_relation, account_id, class_id, period_last_day rows unbounded preceding) as gl_partition,
        sum(case when period_ending_converted_balance_starter is null
            then 0
            else 1
                end) over (order by source_relation, account_id, class_id, period_last_day rows unbounded preceding) as gl_converted_partition
    from gl_patch
),
final as (
    select
        account_id,
        source_relation,
        account_number,
        account_name,
        is_sub_account,
        parent_account_number,
        parent_account_name,
        account_type,
        account_sub_type,
        account_class,
        class_id,
        financial_statement_helper,
        date_year,
        period_first_day,
        period_last_day,
        coalesce(period_net_change, 0) as period_net_change,
        coalesce(period_beginning_balance_starter,
            first_value(period_ending_balance_starter) over (partition by gl_partition
            order by period_last_day rows unbounded preceding)) as period_beginning_balance,
        coalesce(period_ending_balance_starter,
            first_value(period_ending_balance_starter) over (partition by gl_partition
            order by period_last_day rows unbounded preceding)) as period_ending_balance,
        coalesce(period_net_converted_change, 0) as period_net_converted_change,
        coalesce(period_beginning_converted_balance_starter,
            first_value(period_ending_converted_balance_starter) over (partition by gl_converted_partition
            order by period_last_day rows unbounded preceding)) as period_beginning_converted_balance,
        coalesce(period_ending_converted_balance_starter,
            first_value(period_ending_converted_balance_starter) over (partition by gl_partition
            order by period_last_day rows unbounded preceding)) as period_ending_converted_balance
    from gl_value_partition
)
select *
from final""",
 "int_retained_earnings": """
with general_ledger_balances as (
    select *
    from {{ ref('PFX_int_general_ledger_balances') }}
),
net_income_loss as (
    select
        period_first_day,
        source_relation,
        sum(case when account_class = 'Revenue' then period_net_change else 0 end) as revenue_net_change,
        sum(case when account_class = 'Revenue' then period_net_converted_change else 0 end) as revenue_net_converted_change,
        sum(case when account_class = 'Expense' then period_net_change else 0 end) as expense_net_change,
        sum(case when account_class = 'Expense' then period_net_converted_change else 0 end) as expense_net_converted_change
    from general_ledger_balances
    group by 1,2
),
retained_earnings_starter as (
    select
        cast('9999' as string) as account_id,
        source_relation,
        cast('9999-00' as string) as account_number,
        cast('Net Income Adjustment' as string) as account_name,
        false as is_sub_account,
        cast(null as string) as parent_account_number,
        cast(null as string) as parent_account_name,
        cast('Equity' as string) as account_type,
        cast('RetainedEarnings' as string) as account_sub_type,
        cast('Equity' as string) as account_class,
        cast(null as string) as class_id,
        cast('balance_sheet' as string) as financial_statement_helper,
        cast(date_trunc('year', period_first_day) as date) as date_year,
        cast(period_first_day as date) as period_first_day,
        LAST_DAY_RE as period_last_day,
        (revenue_net_change - expense_net_change) as period_net_change,
        (revenue_net_converted_change - expense_net_converted_change) as period_net_converted_change
    from net_income_loss
),
retained_earnings_beginning as (
    select
        *,
        sum(coalesce(period_net_change, 0)) over (order by period_first_day, period_first_day rows unbounded preceding) as period_ending_balance,
        sum(coalesce(period_net_converted_change, 0)) over (order by period_first_day, period_first_day rows unbounded preceding) as period_ending_converted_balance
    from retained_earnings_starter
),
final as (
    select
        account_id,
        source_relation,
        account_number,
        account_name,
        is_sub_account,
        parent_account_number,
        parent_account_name,
        account_type,
        account_sub_type,
        account_class,
        class_id,
        financial_statement_helper,
        date_year,
        period_first_day,
        period_last_day,
        period_net_change,
        lag(coalesce(period_ending_balance,0)) over (order by period_first_day) as period_beginning_balance,
        period_ending_balance,
        period_net_converted_change,
        lag(coalesce(period_ending_balance,0)) over (order by period_first_day) as period_beginning_converted_balance,
        period_ending_converted_balance
    from retained_earnings_beginning
)
select *
from final""",
 "general_ledger_by_period": """
with general_ledger_balances as (
    select *
    from {{ ref('PFX_int_general_ledger_balances') }}
),
retained_earnings as (
    select *
    from {{ ref('PFX_int_retained_earnings') }}
),
balances_earnings_unioned as (
    select *
    from general_ledger_balances
    union all
    select *
    from retained_earnings
),
final as (
    select
        balances_earnings_unioned.*,
        case
            when account_class = 'Asset' then 1
            when account_class = 'Liability' then 2
            when account_class = 'Equity' then 3
            when account_class = 'Revenue' then 1
            when account_class = 'Expense' then 2
        end as account_ordinal
    from balances_earnings_unioned
)
select *
from final""",
}
# the package's schema.yml: unique + not_null on the ledger's unique_id; the source package's
# unique_combination_of_columns on each staging model, headers (<id>, source_relation) and
# lines (<id>, index, source_relation), as it declares them
QB_IDS = {"stg_account": ("account_id", "source_relation"), "stg_item": ("item_id", "source_relation"),
          "stg_bill": ("bill_id", "source_relation"), "stg_invoice": ("invoice_id", "source_relation"),
          "stg_bill_line": ("bill_id", "index", "source_relation"),
          "stg_invoice_line": ("invoice_id", "index", "source_relation"),
          "general_ledger": "unique_id"}
_QB_UNION_COLUMNS = ",\n                ".join(f"cast(`{c}` as {t}) as `{c}`" for c, t in (
    ("transaction_id", "string"), ("source_relation", "string"), ("index", "int"),
    ("transaction_date", "date"), ("customer_id", "string"), ("vendor_id", "string"),
    ("amount", "int"), ("converted_amount", "decimal(29,6)"), ("account_id", "string"),
    ("class_id", "string"), ("department_id", "string"), ("created_at", "timestamp"),
    ("updated_at", "timestamp"), ("transaction_type", "string"), ("transaction_source", "string")))
_QB_MARKS = {
    "UNION_COLUMNS": _QB_UNION_COLUMNS,
    "SURROGATE_GL": surrogate("gl_union.transaction_id", "gl_union.source_relation", "gl_union.index",
                               "gl_union.account_id", " gl_union.transaction_type", "gl_union.transaction_source"),
    "LAST_DAY_GL": dbt_last_day("gl_union.transaction_date"),
    "LAST_DAY_SPINE": dbt_last_day("date_month"),
    "LAST_DAY_RE": dbt_last_day("period_first_day"),
}
PROBES, MODEL_TESTS = ported("qb", {**QB_STAGING, **QB_MARTS}, QB_IDS, _QB_MARKS)
