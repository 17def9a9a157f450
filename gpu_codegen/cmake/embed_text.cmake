# Writes a C++ source defining `std::string_view <FUNCTION>()` that returns the
# text of INPUT verbatim. Run at build time (cmake -P) so that editing the
# embedded file rebuilds the library without re-running configure.
#   cmake -DINPUT=file -DOUTPUT=file.cpp -DFUNCTION=cppi::gpu::name -DHEADER=path.h -P embed_text.cmake
file(READ "${INPUT}" _text)
set(_delim "cppi_embed")  # at most 16 characters
string(FIND "${_text}" ")${_delim}\"" _clash)
if(NOT _clash EQUAL -1)
  message(FATAL_ERROR "${INPUT} contains the raw-string delimiter ${_delim}")
endif()
string(REGEX REPLACE "::[^:]+$" "" _namespace "${FUNCTION}")
string(REGEX REPLACE "^.*::" "" _name "${FUNCTION}")
file(WRITE "${OUTPUT}.tmp"
"// Generated from ${INPUT} by embed_text.cmake; do not edit.\n"
"#include \"${HEADER}\"\n\n"
"namespace ${_namespace} {\n\n"
"std::string_view ${_name}() {\n"
"  static constexpr char kText[] = R\"${_delim}(${_text})${_delim}\";\n"
"  return {kText, sizeof(kText) - 1};\n"
"}\n\n"
"}  // namespace ${_namespace}\n")
# Only touch OUTPUT when it changes, so dependents do not rebuild needlessly.
execute_process(COMMAND ${CMAKE_COMMAND} -E copy_if_different "${OUTPUT}.tmp" "${OUTPUT}")
file(REMOVE "${OUTPUT}.tmp")
