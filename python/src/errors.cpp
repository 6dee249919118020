#include "errors.h"

#include <exception>

#include <nanobind/stl/string.h>

#include "flashattn/flashattn.h"

namespace flashattn::python {
namespace {

PyObject* python_type(ErrorKind kind) {
  switch (kind) {
    case ErrorKind::value: return PyExc_ValueError;
    case ErrorKind::type: return PyExc_TypeError;
    case ErrorKind::unsupported: return PyExc_NotImplementedError;
    case ErrorKind::runtime: break;
  }
  return PyExc_RuntimeError;
}

void translate(const std::exception_ptr& p, void*) {
  try {
    std::rethrow_exception(p);
  } catch (const Error& e) {
    namespace nb = nanobind;
    PyObject* type = python_type(e.kind());
    nb::object exc = nb::borrow(type)(e.what());
    exc.attr("argument") = e.argument();
    PyErr_SetObject(type, exc.ptr());
  }
}

}  // namespace

void register_errors(nanobind::module_&) { nanobind::register_exception_translator(translate); }

}  // namespace flashattn::python
