"""Real dbt packages ported for the probe (tests/functional/probe_real_projects.py), one
module each, and what they share (common.py)."""
