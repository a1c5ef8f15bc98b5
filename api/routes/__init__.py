"""HTTP routes. Thin: parse -> planner -> repository -> response schema."""
