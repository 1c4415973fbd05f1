"""What users read: status, explain, adapter_response, catalog nodes."""
