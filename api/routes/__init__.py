"""HTTP routes. Thin: parse -> one api.services call -> response schema (or status)."""
