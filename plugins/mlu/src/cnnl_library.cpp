#include "cnnl_library.hpp"

namespace h2::mlu {

#define H2_CNNL_RESOLVE(name) , name(library.function<name##Fn>(#name))
CnnlLibrary::CnnlLibrary() : library(neuware_search("libcnnl.so")) H2_CNNL_FUNCTIONS(H2_CNNL_RESOLVE) {}
#undef H2_CNNL_RESOLVE

}  // namespace h2::mlu
