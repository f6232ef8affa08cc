"""What the user's own code must be before symbnn calls it, what symbnn hands it, and how its
failures are told.

- A dataset loader named by import path is a Python function that can be called as
  ``loader(split, root, **options)``: checked on its signature, never by calling it
  (`dataset_loader`). Models and methods are checked where their interfaces live
  (`symbnn.models.imported.resolve`, `symbnn.methods.interface.describe`).
- The arguments symbnn passes to a model's class (``options``, from the configuration or a
  store's ``architecture``) are plain values: numbers, strings, booleans, None, and lists or
  mappings of them; never a string that names code (`options_problem`). A store is data, and
  its options must not steer a class into importing something.
- Code of the user's own that raises is told as one line naming the code and the step
  (`UserCodeError`, `calling`); its own traceback is the error's cause, which a workflow job's
  log keeps (`symbnn.runlog`) and ``symbnn --debug`` prints.

No torch here: the settings layer and the workflow's planning use this module.
"""

from __future__ import annotations

import contextlib
import inspect
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any

from symbnn import trust
from symbnn.trust import UserCodeError  # defined one floor down: importing a module can fail too

PLAIN_SCALARS = (bool, int, float, str, type(None))
PLAIN_WORDS = "numbers, strings, booleans, null, and lists or mappings of them"


@contextlib.contextmanager
def calling(what: str, step: str) -> Iterator[None]:
    """Run the user's code of the block; an exception it raises becomes a `UserCodeError`
    "``what`` failed ``step``: Type: message" (one already told is passed on as it is)."""
    try:
        yield
    except UserCodeError:
        raise
    except Exception as exc:
        raise UserCodeError(f"{what} failed {step}: {type(exc).__name__}: {exc}") from exc


def options_problem(value: Any, where: str) -> str | None:
    """Why ``value`` (at key ``where``) is not plain data symbnn may hand a class: the key at
    fault and what it holds; None when every value is plain."""
    if isinstance(value, str):
        if trust.IMPORT_PATH.fullmatch(value):
            return (
                f"{where}: {value!r} names code (package.module:attribute); options are "
                f"plain values ({PLAIN_WORDS}), never code"
            )
        return None
    if isinstance(value, PLAIN_SCALARS):
        return None
    if isinstance(value, list | tuple):
        items: Iterable[tuple[str, Any]] = ((f"{where}[{i}]", item) for i, item in enumerate(value))
    elif isinstance(value, Mapping):
        bad = [key for key in value if not isinstance(key, str)]
        if bad:
            return f"{where}: key {bad[0]!r} is not a string"
        items = ((f"{where}.{key}", item) for key, item in value.items())
    else:
        return f"{where}: a {type(value).__name__} is not a plain value ({PLAIN_WORDS})"
    return next((p for key, item in items if (p := options_problem(item, key))), None)


def check_options(options: Any, where: str) -> None:
    """ValueError naming the key when ``options`` is not plain data (`options_problem`)."""
    problem = options_problem(options, where)
    if problem is not None:
        raise ValueError(problem)


def dataset_loader(path: str, options: Iterable[str] = ()) -> Callable[..., Any]:
    """The loader function ``path`` names (imported only if trusted), checked to be a Python
    function callable as ``loader(split, root, **options)`` for the option names given;
    ValueError naming the path and what is wrong. The loader is not called."""
    loader = trust.import_object("dataset", path)
    name = path.partition(":")[2]
    if not inspect.isfunction(loader):
        raise ValueError(
            f"dataset loader {path!r} is a {type(loader).__name__}, not a function "
            f"{name}(split, root, **options)"
        )
    keywords = {key: None for key in options}
    try:
        inspect.signature(loader).bind("train", "root", **keywords)
    except TypeError as exc:
        raise ValueError(
            f"dataset loader {path!r} cannot be called as {name}(split, root"
            f"{''.join(f', {key}=...' for key in keywords)}): {exc}"
        ) from None
    return loader
