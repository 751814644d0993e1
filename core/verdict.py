"""The one verdict enum shared by single tests and whole jobs."""

from __future__ import annotations

from enum import StrEnum


class Verdict(StrEnum):
    OK = "OK"
    WRONG_ANSWER = "WRONG_ANSWER"
    TIME_LIMIT = "TIME_LIMIT"
    MEMORY_LIMIT = "MEMORY_LIMIT"
    RUNTIME_ERROR = "RUNTIME_ERROR"
    OUTPUT_LIMIT = "OUTPUT_LIMIT"
    COMPILE_ERROR = "COMPILE_ERROR"  # syntax error: no test is run
    NO_CODE = "NO_CODE"  # no usable fenced block in the completion
    UNKNOWN_PROBLEM = "UNKNOWN_PROBLEM"  # the job names a problem the fleet does not have
    INTERNAL = "INTERNAL"  # infrastructure failure: infra_error is set, the trainer masks it

    @property
    def is_infra(self) -> bool:
        """Verdicts that say nothing about the model's answer and must never become a reward."""
        return self in (Verdict.INTERNAL, Verdict.UNKNOWN_PROBLEM)
