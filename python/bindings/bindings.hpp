// bindings.hpp -- one function per binding translation unit.
#pragma once

#include <pybind11/pybind11.h>

namespace kernbench::bindings {

void bind_sim(pybind11::module_& m);
void bind_topology(pybind11::module_& m);
void bind_runtime(pybind11::module_& m);
void bind_kernels(pybind11::module_& m);
void bind_config(pybind11::module_& m);

}  // namespace kernbench::bindings
