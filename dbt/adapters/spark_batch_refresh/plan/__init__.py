"""Deciding what one run of one model does (pure): configs, the planner, change-feed gaps."""
