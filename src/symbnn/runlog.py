"""Send a workflow script's output to its Snakemake log file, and the one error path that the
CLI and the workflow scripts share: an expected failure (a bad value or file, a damaged store,
a full disk, a permission) becomes one line naming what is wrong; a bug keeps its traceback."""

from __future__ import annotations

import contextlib
import logging
import os
import sys
from collections.abc import Iterator

from symbnn.atomic import polars_io_error
from symbnn.user_code import UserCodeError

# Exit status of every expected failure, on the command line and in a workflow job.
EXIT_FAILURE = 1


def expected_error(exc: BaseException) -> str | None:
    """The one-line message of an expected failure, or None for anything else (a bug, whose
    traceback is what a developer needs).

    Expected: symbnn's own errors (StoreError, ConfigError and MMDInputError are ValueErrors or
    StoreErrors), ValueError, OSError (missing file, full disk, permission), and the I/O errors
    of polars, YAML and Zarr, which name the file or the problem in their message."""
    # local: keeps zarr out of importing symbnn.runlog
    from symbnn.store import StoreError

    if isinstance(exc, OSError):
        reason = exc.strerror or str(exc) or type(exc).__name__
        name = exc.filename
        if name is not None and not exc.filename2:
            return f"{os.fspath(name)}: {reason}"
        return str(exc) if exc.filename2 else reason
    text = str(exc).strip() or type(exc).__name__
    if isinstance(exc, (StoreError, ValueError)):
        return text
    if _foreign_io_error(exc):
        return f"{text} ({type(exc).__name__})"
    return None


def _foreign_io_error(exc: BaseException) -> bool:
    """polars' I/O error (`polars_io_error`), a YAML syntax error, or a Zarr error (a path
    that is not what it should be)."""
    return polars_io_error(exc) or type(exc).__module__.split(".")[0] in ("yaml", "zarr")


@contextlib.contextmanager
def log_to(path: str | os.PathLike | None) -> Iterator[None]:
    """Redirect stdout, stderr and `logging` to ``path`` for the block (no-op for None).

    An expected failure (`expected_error`) is written to the log and to the job's stderr as
    one line, and the script exits with status 1: no traceback, and nothing that names the
    hidden files outputs are built in; when code of the user's own failed, the log holds its
    traceback before that line. Any other exception is written to the log with its
    traceback before it propagates, so the log explains a failure."""
    if not path:
        try:
            yield
        except Exception as exc:
            _exit_cleanly(exc, None, None)
        return
    stderr = sys.stderr
    os.makedirs(os.path.dirname(os.fspath(path)) or ".", exist_ok=True)
    root = logging.getLogger()
    # restored afterwards: a handler left on the closed log would break later logging
    saved = root.handlers[:], root.level
    with (
        open(path, "w", buffering=1) as handle,
        contextlib.redirect_stdout(handle),
        contextlib.redirect_stderr(handle),
        _restored_logging(root, *saved),
    ):
        logging.basicConfig(
            stream=handle,
            level=logging.INFO,
            force=True,
            format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        )
        try:
            yield
        except Exception as exc:
            _exit_cleanly(exc, handle, stderr, path)
        except BaseException:
            import traceback

            traceback.print_exc(file=handle)
            raise
        finally:
            sys.stdout.flush()


@contextlib.contextmanager
def _restored_logging(root: logging.Logger, handlers: list, level: int) -> Iterator[None]:
    try:
        yield
    finally:
        for handler in root.handlers[:]:
            if handler not in handlers:
                root.removeHandler(handler)
                handler.close()
        for handler in handlers:
            if handler not in root.handlers:
                root.addHandler(handler)
        root.setLevel(level)


def _exit_cleanly(exc: Exception, handle, stderr, path=None) -> None:
    """Print an expected failure as one line (to the log and the real stderr) and exit 1;
    re-raise anything else, after writing its traceback to the log."""
    message = expected_error(exc)
    if message is None:
        if handle is not None:
            import traceback

            traceback.print_exc(file=handle)
        raise exc
    line = f"error: {message}"
    if handle is not None:
        if from_user_code(exc):  # the user's own traceback, for the user to read in the log
            import traceback

            traceback.print_exception(exc, file=handle)
        print(line, file=handle, flush=True)
        line += f" (log: {path})"
    print(line, file=stderr or sys.stderr, flush=True)
    raise SystemExit(EXIT_FAILURE) from None


def from_user_code(exc: BaseException) -> bool:
    """Whether the failure is one of code of the user's own (`symbnn.user_code`), here or
    as the cause of the error that tells it (a store's error naming a model that failed)."""
    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, UserCodeError):
            return True
        seen = seen.__cause__
    return False
