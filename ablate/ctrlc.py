"""Ctrl-C while a command starts. Python raises KeyboardInterrupt wherever the main thread is, and one raised
while an import runs a finalizer (a `__del__`, a weakref callback) is printed as ignored and swallowed: the
command went on, and a whole run trained after the user had pressed Ctrl-C (seen under load, where torch's import
takes longest). `install()` makes SIGINT note that it came before it raises as Python's own handler does;
`check()`, where a command's work begins, raises it again if it was swallowed. A leaf: every layer may call it."""

from __future__ import annotations

import signal
import threading

_pressed = False


def _handler(signum, frame):
    global _pressed
    _pressed = True
    raise KeyboardInterrupt


def install() -> None:
    """In the main thread, where SIGINT has Python's own handler (not where it is ignored, as in a background
    job of a shell without job control: it stays so)."""
    if threading.current_thread() is threading.main_thread() and \
            signal.getsignal(signal.SIGINT) is signal.default_int_handler:
        signal.signal(signal.SIGINT, _handler)


def check() -> None:
    """KeyboardInterrupt if Ctrl-C came after install() (raised then, and maybe swallowed since)."""
    if _pressed:
        raise KeyboardInterrupt
