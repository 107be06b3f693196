"""Where a zero-copy ``msgspec.Raw`` lies inside the request body.

msgspec decodes ``Raw`` values as views into the input ``bytes``. The items of a JSON array are
consecutive in the body, separated only by commas and whitespace, so when every offered node
passes the whole ``items`` array can be sent back as ONE slice of the request body: no 50 MB
join, no page faults for a fresh reply buffer. Finding the slice needs the address of the first
and last item inside the body; Python exposes buffer addresses only through the C API, hence
``ctypes`` here and nowhere else.
"""

from __future__ import annotations

import ctypes


class _PyBuffer(ctypes.Structure):
    _fields_ = [
        ("buf", ctypes.c_void_p),
        ("obj", ctypes.py_object),
        ("len", ctypes.c_ssize_t),
        ("itemsize", ctypes.c_ssize_t),
        ("readonly", ctypes.c_int),
        ("ndim", ctypes.c_int),
        ("format", ctypes.c_char_p),
        ("shape", ctypes.c_void_p),
        ("strides", ctypes.c_void_p),
        ("suboffsets", ctypes.c_void_p),
        ("internal", ctypes.c_void_p),
    ]


_get_buffer = ctypes.pythonapi.PyObject_GetBuffer
_get_buffer.argtypes = [ctypes.py_object, ctypes.POINTER(_PyBuffer), ctypes.c_int]
_get_buffer.restype = ctypes.c_int
_release = ctypes.pythonapi.PyBuffer_Release
_release.argtypes = [ctypes.POINTER(_PyBuffer)]
_release.restype = None


def _address(obj: object) -> tuple[int, int]:
    """(address, length) of an object's contiguous read-only buffer."""
    view = _PyBuffer()
    if _get_buffer(obj, ctypes.byref(view), 0) != 0:  # PyBUF_SIMPLE
        raise TypeError("object does not expose a buffer")
    try:
        return int(view.buf or 0), int(view.len)
    finally:
        _release(ctypes.byref(view))


def span_in(body: bytes, first: object, last: object) -> memoryview | None:
    """The slice of ``body`` from the start of ``first`` to the end of ``last``, or None when
    either is not a view into ``body`` (then the caller copies instead)."""
    base, size = _address(body)
    start, _ = _address(first)
    end_start, end_len = _address(last)
    lo, hi = start - base, end_start + end_len - base
    if not (0 <= lo <= hi <= size):
        return None
    return memoryview(body)[lo:hi]
