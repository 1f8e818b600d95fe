"""Turn any exception that reaches the command line into one line and an exit code.

Why a table of our own: each failure a user can cause or meet has a known remedy (fix the
registry entry, wait for the writer holding the warehouse, check the model server), and a
traceback tells them none of it. Anything not listed is still one line, with its type, and
``--debug`` for the traceback. Imported only when a command has failed.
"""

from __future__ import annotations

import argparse

EXIT_FAILED, EXIT_BAD_INPUT = 1, 2


class UsageError(Exception):
    """A command line that cannot be carried out as given (exit 2, one line)."""



def _pydantic_line(exc) -> str:
    err = exc.errors()[0]
    loc = ".".join(map(str, err["loc"])) or "value"
    return f"{exc.title}: field {loc}: {err['msg']}"


def describe(exc: BaseException, args: argparse.Namespace) -> tuple[str, int]:
    """(message, exit code) for ``exc`` raised by the command in ``args``."""
    from pydantic import ValidationError

    from envduels_dagster.core.authoring.imports import ImportInputError
    from envduels_dagster.core.authoring.reply_parsing import AuthorReplyError
    from envduels_dagster.core.models.registry import RegistryError
    from envduels_dagster.core.storage.warehouse import WarehouseMigrationError
    from envduels_dagster.core.training.export import ExportIntegrityError
    from envduels_dagster.core.training.format import ExportFormatError

    command = getattr(args, "command", "?")
    text = " ".join(str(exc).split())  # one line, whatever the exception carried
    if type(exc).__name__ == "UsageError":
        return text, EXIT_BAD_INPUT
    if type(exc).__name__ == "SettingsError":  # resources/duel_settings.py: a bad ENVDUELS_* size
        return f"settings: {text}", EXIT_BAD_INPUT
    if type(exc).__name__ in ("StateFileError", "Busy", "PilotFailed"):  # each says which file/process and what to do
        return text, EXIT_FAILED
    if type(exc).__name__ == "ExperimentFileError":  # core/storage/experiment_file.py: stored settings unusable
        return f"experiment settings: {text}", EXIT_BAD_INPUT
    if type(exc).__name__ == "BudgetError":  # core/models/budget.py: a cap that cannot be used
        return f"budget: {text}", EXIT_BAD_INPUT
    if isinstance(exc, RegistryError):
        return f"registry error: {text}", EXIT_BAD_INPUT
    if isinstance(exc, ExportFormatError):
        return f"{getattr(args, 'path', '')}: bad export: {text}; fix the export and run again", EXIT_BAD_INPUT
    if isinstance(exc, ImportInputError):
        return f"{getattr(args, 'path', '')}: cannot import: {text}", EXIT_BAD_INPUT
    if type(exc).__name__ == "ImportRunFailed":
        return f"import failed: {text}", EXIT_FAILED
    if isinstance(exc, ExportIntegrityError):
        return f"export integrity: {text}", EXIT_FAILED
    if isinstance(exc, AuthorReplyError):
        return f"unparsable author reply: {text}", EXIT_BAD_INPUT
    if isinstance(exc, ValidationError):
        return f"{command}: invalid input: {_pydantic_line(exc)}", EXIT_BAD_INPUT
    if isinstance(exc, WarehouseMigrationError):
        return f"warehouse migration: {text}", EXIT_FAILED
    if isinstance(exc, (FileNotFoundError, IsADirectoryError, NotADirectoryError, PermissionError)):
        where = exc.filename or getattr(args, "path", "")
        return f"{where}: {exc.strerror or text}; check the path and its permissions", EXIT_BAD_INPUT
    if isinstance(exc, UnicodeDecodeError):
        return f"{getattr(args, 'path', '')}: not UTF-8 text ({exc.reason}); save it as UTF-8", EXIT_BAD_INPUT
    if _is_duckdb_lock(exc):
        from envduels_dagster.settings.locations import warehouse_path

        return (f"warehouse {warehouse_path()} is in use by another process (a Dagster run or a dbt build?); "
                "wait for it to finish and run again"), EXIT_FAILED
    if type(exc).__name__ == "LLMError":
        return (f"{command}: model call failed after retries: {text}; check the model's api_base, key "
                "variable and server"), EXIT_FAILED
    if command in ("demo", "run") and isinstance(exc, RuntimeError):
        return f"{command} failed: {text}", EXIT_FAILED
    if isinstance(exc, OSError):
        return f"{command}: {text}", EXIT_FAILED
    return f"{command} failed: {type(exc).__name__}: {text}", EXIT_FAILED


def _is_duckdb_lock(exc: BaseException) -> bool:
    # duckdb raises its errors from the compiled module: ``_duckdb.IOException`` (issue 33: never recognised)
    from envduels_dagster.core.storage.location import is_lock_error

    return is_lock_error(exc)
