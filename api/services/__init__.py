"""The use cases both front ends (``api.routes``, ``api.cli``) call: the only code
that runs queries (through ``api.db``) and calls the planner."""
