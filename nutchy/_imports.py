"""Scrapy's HTTP/1.1 download handler, imported for less than Scrapy's own import of it costs.

Importing ``scrapy.core.downloader.handlers.http11`` imports Scrapy's TLS modules, which define
three deprecated aliases with ``scrapy.utils.deprecate.create_deprecated_class``. To name the
module each alias is defined in, that function calls :func:`inspect.stack` and
:func:`inspect.getmodule` on its caller's frame: the whole stack is built, with the source line of
every frame (read from its file) and each frame's module looked up among all those imported, each
module's file resolved on disk. In ``nutchy crawl``'s process the three :func:`inspect.stack`
calls took 85-93 ms (under some thirty frames of imports each), once per process, about 3.5% of
a re-crawl with the sitemaps of the 20-host doc site (docs/benchmarks.md).

:func:`import_download_handler` imports the module with :func:`inspect.stack` answering what that
function reads of it, the two innermost frames without their source lines, and
:func:`inspect.getmodule` answering for a frame from the frame's own globals: the aliases come out
the same (their ``__module__`` included), and both functions are themselves again once the
import is done. Only nutchy's own processes call it, at their start (the settings' check of the
address guard, the fetch's crawler), where no other thread of theirs calls either.
"""

from __future__ import annotations

import functools
import importlib
import inspect
import sys
from types import FrameType
from typing import Any, Final

#: The module of Scrapy's HTTP/1.1 download handler (http and https).
HTTP11_MODULE: Final = "scrapy.core.downloader.handlers.http11"


def import_download_handler() -> None:
    """Import :data:`HTTP11_MODULE` (if not imported yet) with a cheap :func:`inspect.stack` and
    :func:`inspect.getmodule`."""
    if HTTP11_MODULE in sys.modules:
        return
    stack, getmodule = inspect.stack, inspect.getmodule
    inspect.stack = _two_frames
    inspect.getmodule = functools.partial(_module_of, getmodule)
    try:
        importlib.import_module(HTTP11_MODULE)
    finally:
        inspect.stack, inspect.getmodule = stack, getmodule


def _two_frames(context: int = 1) -> list[Any]:
    """The frame that called this and its caller's, as :func:`inspect.stack` lists them, without
    their source lines (*context* is taken and not used)."""
    frames: list[Any] = []
    frame: FrameType | None = sys._getframe(1)
    while frame is not None and len(frames) < 2:
        code = frame.f_code
        frames.append(
            inspect.FrameInfo(frame, code.co_filename, frame.f_lineno, code.co_name, None, None)
        )
        frame = frame.f_back
    return frames


def _module_of(getmodule: Any, thing: object, _filename: str | None = None) -> Any:
    """The module of a frame, from the frame's globals (where :func:`inspect.getmodule` compares
    the frame's file with the file of every module imported); *getmodule*'s answer for anything
    else."""
    if inspect.isframe(thing):
        return sys.modules.get(thing.f_globals.get("__name__", ""))
    return getmodule(thing, _filename)
