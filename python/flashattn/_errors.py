"""Errors raised by the Python layer, in the same form as the C++ library's.

Every refusal is a built-in exception (ValueError, TypeError, NotImplementedError,
RuntimeError) whose message names the argument and whose `argument` attribute holds
that name, exactly like the ones _C raises from flashattn::Error.
"""


def error(kind, argument, message):
    exc = kind(f"flashattn: argument '{argument}': {message}")
    exc.argument = argument
    return exc
