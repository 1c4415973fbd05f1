"""One refresh: stage, aggregate sidecar, apply, chunked apply and lease, record, result, verify."""
