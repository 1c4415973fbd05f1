"""fivetran/dbt_xero as the probe runs it (tests/functional/probe_real_projects.py):
`xr_` keyless, `xrk_` with the package's key tests (MODEL_TESTS)."""
from __future__ import annotations

from tests.functional.probes.common import C, O, P, PR, ported, surrogate

# fivetran/dbt_xero (v1.x), ported: one connector (`source_relation` ''), the calendar spine
# fixed to 2024 (the package runs it to next month from `current_date`), `current_date` in the
# balance sheet's year end fixed to 2024-06-30, dbt_utils' group_by(n) written as ordinals as
# it compiles, generate_surrogate_key spelled out, one pivoted tracking-category pair
# (`region`, `department`; the package pivots the names it reads at compile time) on journal
# lines and none on invoice lines. Journals come from orders, journal lines and their
# tracking from payments, accounts and tracking options from products, invoices, contacts and
# credit notes from customers, bank transactions from paid orders, invoice lines from orders.
_XR_AT = "date'2024-01-01'"
XR_STAGING = {
 "stg_journal": f"""
select id as journal_id, dateadd(DAY, id, {_XR_AT}) as journal_date,
  cast(dateadd(DAY, id, {_XR_AT}) as timestamp) as created_date_utc, id as journal_number,
  status as reference,
  case status when 'new' then 'ACCREC' when 'paid' then 'CASHREC'
              when 'cancelled' then 'ACCRECCREDIT' else 'MANJOURNAL' end as source_type,
  case status when 'paid' then id else customer_id end as source_id,
  cast('' as string) as source_relation
from {O}""",
 "stg_journal_line": f"""
select id as journal_line_id, order_id as journal_id, id % 10 + 1 as account_id, method as description,
  cast(amount as decimal(18, 2)) as net_amount, cast(amount as decimal(18, 2)) * 1.1 as gross_amount,
  cast(amount as decimal(18, 2)) * 0.1 as tax_amount, 'GST' as tax_name,
  case when method = 'void' then 'NONE' else 'OUTPUT' end as tax_type,
  cast('' as string) as source_relation
from {P}""",
 "stg_account": f"""
select id as account_id, concat('A', id) as account_code, concat(category, '-', id) as account_name,
  element_at(array('BANK', 'CURRENT', 'EQUITY', 'REVENUE', 'OVERHEADS'), cast(id % 5 + 1 as int)) as account_type,
  element_at(array('ASSET', 'LIABILITY', 'EQUITY', 'REVENUE', 'EXPENSE'), cast(id % 5 + 1 as int)) as account_class,
  cast('' as string) as source_relation
from {PR}""",
 "stg_invoice": f"""
select id as invoice_id, (id * 3) % 40 + 1 as contact_id, dateadd(DAY, id * 2, {_XR_AT}) as invoice_date,
  concat('INV-', id) as invoice_number, tier as invoice_status, 'ACCREC' as type,
  cast('' as string) as source_relation
from {C}""",
 "stg_bank_transaction": f"""
select id as bank_transaction_id, customer_id as contact_id, cast('' as string) as source_relation
from {O} where status = 'paid'""",
 "stg_credit_note": f"""
select id as credit_note_id, id % 40 + 1 as contact_id, cast('' as string) as source_relation
from {C} where region = 'eu'""",
 "stg_contact": f"""
select id as contact_id, name as contact_name, cast('' as string) as source_relation from {C}""",
 "stg_organization": f"""
select distinct 12 as financial_year_end_month, 31 as financial_year_end_day,
  cast('' as string) as source_relation
from {PR}""",
 "stg_journal_line_has_tracking_category": f"""
select order_id as journal_id, id as journal_line_id, id % 2 + 1 as tracking_category_id,
  id % 3 + 1 as tracking_category_option_id, cast('' as string) as source_relation
from {P} where method <> 'void'""",
 "stg_invoice_line_item": f"""
select id as line_item_id, customer_id as invoice_id, concat('A', product_id) as account_code,
  amount % 4 + 1 as quantity, cast(amount as decimal(18, 2)) as unit_amount,
  cast(amount as decimal(18, 2)) * (amount % 4 + 1) as line_amount, status as description,
  cast('' as string) as source_relation
from {O}""",
 "int_tracking_categories_with_options": f"""
select id % 2 + 1 as tracking_category_id,
  case id % 2 when 0 then 'department' else 'region' end as tracking_category_name,
  id as tracking_option_id, category as tracking_option_name, cast('' as string) as source_relation
from {PR}""",
}
XR_MARTS = {
 "calendar_spine": """
with spine as (
    select explode(sequence(date'2024-01-01', date'2024-12-01', interval 1 month)) as date_month
), cleaned as (
    select cast(date_month as date) as date_month
    from spine
)
select *
from cleaned""",
 "int_journal_line_pivoted_tracking_categories": """
with journal_line_has_tracking as (
    select *
    from {{ ref('PFX_stg_journal_line_has_tracking_category') }}
), tracking_categories_with_options as (
    select *
    from {{ ref('PFX_int_tracking_categories_with_options') }}
), journal_tracking as (
    select
        journal_line_has_tracking.journal_id,
        journal_line_has_tracking.journal_line_id,
        journal_line_has_tracking.source_relation,
        tracking_categories_with_options.tracking_category_name,
        tracking_categories_with_options.tracking_option_name
    from journal_line_has_tracking
    left join tracking_categories_with_options
        on journal_line_has_tracking.tracking_category_id = tracking_categories_with_options.tracking_category_id
        and journal_line_has_tracking.tracking_category_option_id = tracking_categories_with_options.tracking_option_id
        and journal_line_has_tracking.source_relation = tracking_categories_with_options.source_relation
),
final as (
    select
        journal_id,
        journal_line_id,
        source_relation
        ,
      max(
        case
        when tracking_category_name = 'department'
          then tracking_option_name
        else null
        end
      )
        as department
      ,
      max(
        case
        when tracking_category_name = 'region'
          then tracking_option_name
        else null
        end
      )
        as region
    from journal_tracking
    group by 1,2,3
)
select *
from final""",
 "general_ledger": """
with journals as (
    select *
    from {{ ref('PFX_stg_journal') }}
), journal_lines as (
    select *
    from {{ ref('PFX_stg_journal_line') }}
), accounts as (
    select *
    from {{ ref('PFX_stg_account') }}
), invoices as (
    select *
    from {{ ref('PFX_stg_invoice') }}
), bank_transactions as (
    select *
    from {{ ref('PFX_stg_bank_transaction') }}
), credit_notes as (
    select *
    from {{ ref('PFX_stg_credit_note') }}
), contacts as (
    select *
    from {{ ref('PFX_stg_contact') }}
)
, pivoted_tracking_categories as (
    select *
    from {{ ref('PFX_int_journal_line_pivoted_tracking_categories') }}
)
, joined as (
    select
        journals.journal_id,
        journals.created_date_utc,
        journals.journal_date,
        journals.journal_number,
        journals.reference,
        journals.source_id,
        journals.source_type,
        journals.source_relation,
        journal_lines.journal_line_id,
        accounts.account_code,
        accounts.account_id,
        accounts.account_name,
        accounts.account_type,
        journal_lines.description,
        journal_lines.gross_amount,
        journal_lines.net_amount,
        journal_lines.tax_amount,
        journal_lines.tax_name,
        journal_lines.tax_type,
        accounts.account_class,
        case when journals.source_type in ('ACCPAY', 'ACCREC') then journals.source_id end as invoice_id,
        case when journals.source_type in ('CASHREC','CASHPAID') then journals.source_id end as bank_transaction_id,
        case when journals.source_type in ('TRANSFER') then journals.source_id end as bank_transfer_id,
        case when journals.source_type in ('MANJOURNAL') then journals.source_id end as manual_journal_id,
        case when journals.source_type in ('APPREPAYMENT', 'APOVERPAYMENT', 'ACCPAYPAYMENT', 'ACCRECPAYMENT', 'ARCREDITPAYMENT', 'APCREDITPAYMENT') then journals.source_id end as payment_id,
        case when journals.source_type in ('ACCPAYCREDIT','ACCRECCREDIT') then journals.source_id end as credit_note_id
        -- Pivoted tracking categories, excluding duplicate columns
        , pivoted_tracking_categories.department, pivoted_tracking_categories.region
    from journals
    left join journal_lines
        on (journals.journal_id = journal_lines.journal_id
        and journals.source_relation = journal_lines.source_relation)
    left join accounts
        on (accounts.account_id = journal_lines.account_id
        and accounts.source_relation = journal_lines.source_relation)
    left join pivoted_tracking_categories
        on (journal_lines.journal_line_id = pivoted_tracking_categories.journal_line_id
        and journals.journal_id = pivoted_tracking_categories.journal_id
        and journals.source_relation = pivoted_tracking_categories.source_relation)
), first_contact as (
    select
        joined.*,
        coalesce(
            invoices.contact_id
                , bank_transactions.contact_id
            , credit_notes.contact_id
        )
        as contact_id
    from joined
    left join invoices
        on (joined.invoice_id = invoices.invoice_id
        and joined.source_relation = invoices.source_relation)
    left join bank_transactions
        on (joined.bank_transaction_id = bank_transactions.bank_transaction_id
        and joined.source_relation = bank_transactions.source_relation)
    left join credit_notes
        on (joined.credit_note_id = credit_notes.credit_note_id
        and joined.source_relation = credit_notes.source_relation)
), second_contact as (
    select
        first_contact.*,
        contacts.contact_name
    from first_contact
    left join contacts
        on (first_contact.contact_id = contacts.contact_id
        and first_contact.source_relation = contacts.source_relation)
)
select *
from second_contact""",
 "balance_sheet_report": """
with calendar as (
    select *
    from {{ ref('PFX_calendar_spine') }}
), ledger as (
    select *
    from {{ ref('PFX_general_ledger') }}
), organization as (
    select *
    from {{ ref('PFX_stg_organization') }}
), year_end as (
    select
        case
            when cast(extract(year from date'2024-06-30') || '-' || financial_year_end_month || '-' || financial_year_end_day as date) >= date'2024-06-30'
            then cast(extract(year from date'2024-06-30') || '-' || financial_year_end_month || '-' || financial_year_end_day as date)
            else cast(extract(year from add_months(date'2024-06-30', -12)) || '-' || financial_year_end_month || '-' || financial_year_end_day as date)
        end as current_year_end_date
    from organization
), joined as (
    select
        calendar.date_month,
        case
            when ledger.account_class in ('ASSET','EQUITY','LIABILITY') then ledger.account_name
            when ledger.journal_date <= add_months(year_end.current_year_end_date, -12) then 'Retained Earnings'
            else 'Current Year Earnings'
        end as account_name,
        case
            when ledger.account_class in ('ASSET','EQUITY','LIABILITY') then ledger.account_code
            else null
        end as account_code,
        case
            when ledger.account_class in ('ASSET','EQUITY','LIABILITY') then ledger.account_id
            else null
        end as account_id,
        case
            when ledger.account_class in ('ASSET','EQUITY','LIABILITY') then ledger.account_type
            else null
        end as account_type,
        case
            when ledger.account_class in ('ASSET','EQUITY','LIABILITY') then ledger.account_class
            else 'EQUITY'
        end as account_class,
        sum(ledger.net_amount) as net_amount
    from calendar
    inner join ledger
        on calendar.date_month >= cast(date_trunc('month', ledger.journal_date) as date)
    cross join year_end
    group by 1,2,3,4,5,6
)
select *
from joined""",
 "profit_and_loss_report": """
with calendar as (
    select *
    from {{ ref('PFX_calendar_spine') }}
), ledger as (
    select *
    from {{ ref('PFX_general_ledger') }}
)
, pivoted_tracking_categories as (
    select *
    from {{ ref('PFX_int_journal_line_pivoted_tracking_categories') }}
)
, joined as (
    select
        SURROGATE_PNL as profit_and_loss_id,
        calendar.date_month,
        ledger.account_id,
        ledger.account_name,
        ledger.account_code,
        ledger.account_type,
        ledger.account_class,
        ledger.source_relation,
        -- Dynamically pivoted tracking category columns
        pivoted_tracking_categories.department, pivoted_tracking_categories.region,
        coalesce(sum(ledger.net_amount * -1), 0) as net_amount
    from calendar
    left join ledger
        on calendar.date_month = cast(date_trunc('month', ledger.journal_date) as date)
    left join pivoted_tracking_categories
        on ledger.journal_line_id = pivoted_tracking_categories.journal_line_id
        and ledger.journal_id = pivoted_tracking_categories.journal_id
        and ledger.source_relation = pivoted_tracking_categories.source_relation
    where ledger.account_class in ('REVENUE','EXPENSE')
    group by 1,2,3,4,5,6,7,8,9,10
)
select *
from joined""",
 "invoice_line_items": """
with line_items as (
    select *
    from {{ ref('PFX_stg_invoice_line_item') }}
), invoices as (
    select *
    from {{ ref('PFX_stg_invoice') }}
), accounts as (
    select *
    from {{ ref('PFX_stg_account') }}
), contacts as (
    select *
    from {{ ref('PFX_stg_contact') }}
), joined as (
    select
        line_items.*,
        invoices.invoice_date,
        invoices.invoice_number,
        invoices.invoice_status,
        invoices.type,
        accounts.account_id,
        accounts.account_name,
        accounts.account_type,
        accounts.account_class,
        contacts.contact_name
    from line_items
    left join invoices
        on line_items.invoice_id = invoices.invoice_id
        and line_items.source_relation = invoices.source_relation
    left join accounts
        on line_items.account_code = accounts.account_code
        and line_items.source_relation = accounts.source_relation
    left join contacts
        on invoices.contact_id = contacts.contact_id
        and invoices.source_relation = contacts.source_relation
)
select *
from joined""",
}
# the package's schema.yml: unique + not_null on each staging id (the tracking and organization
# models have combination tests, not column keys) and on the two reports' ids
XR_IDS = {"stg_journal": "journal_id", "stg_journal_line": "journal_line_id",
          "stg_account": "account_id", "stg_invoice": "invoice_id",
          "stg_bank_transaction": "bank_transaction_id", "stg_credit_note": "credit_note_id",
          "stg_contact": "contact_id", "stg_invoice_line_item": "line_item_id",
          "profit_and_loss_report": "profit_and_loss_id"}
_XR_MARKS = {"SURROGATE_PNL": surrogate(
    "calendar.date_month", "ledger.account_id", "ledger.source_relation",
    "pivoted_tracking_categories.department", "pivoted_tracking_categories.region")}
PROBES, MODEL_TESTS = ported("xr", {**XR_STAGING, **XR_MARTS}, XR_IDS, _XR_MARKS)
