// flashattn::Error -> the Python exception of its kind, with `.argument` set.
#pragma once

#include <nanobind/nanobind.h>

namespace flashattn::python {

// value -> ValueError, type -> TypeError, unsupported -> NotImplementedError,
// runtime -> RuntimeError. The message is the library's ("flashattn: argument
// 'k': ..."); the exception's `argument` attribute holds the bare name.
void register_errors(nanobind::module_& m);

}  // namespace flashattn::python
