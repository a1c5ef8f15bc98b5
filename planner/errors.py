"""Domain errors. They carry a code, a message and the offending fields, never an
HTTP status: the api maps them to its single error body, the CLI to exit status 2."""

from __future__ import annotations


class PlanningError(ValueError):
    """Bad input or an impossible request. ``issues`` is a list of (field, message)."""

    code = "invalid_input"

    def __init__(self, message: str, issues: list[tuple[str, str]] | None = None):
        super().__init__(message)
        self.message = message
        self.issues = issues or []

    @classmethod
    def for_field(cls, field: str, message: str) -> PlanningError:
        """An error about one field: the message reads ``field: message``."""
        return cls(f"{field}: {message}", [(field, message)])


class UnknownEntryError(PlanningError):
    """A catalog id that does not exist (model, GPU, workload, link)."""

    code = "unknown_entry"


class DoesNotFitError(PlanningError):
    """A model that does not fit in the replica's memory."""

    code = "does_not_fit"


class PlanningTimeLimit(PlanningError):
    """The request asks for more work than its time limit allows (screening ran out)."""

    code = "planning_time_limit"
