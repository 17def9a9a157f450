# Writes OUTPUT, a C++ file holding INPUT (the prelude header) as a string, so
# the library carries the prelude and kernels never read it from disk. The
# prelude's parts (`#include "cpu_codegen/prelude/<part>.h"` lines) are pasted
# in where they are included: the compiler sees one in-memory header.
file(READ "${INPUT}" content)
get_filename_component(dir "${INPUT}" DIRECTORY)
string(REGEX MATCHALL "#include \"cpu_codegen/prelude/[a-z_]+\\.h\"" parts "${content}")
foreach(line IN LISTS parts)
  string(REGEX REPLACE "#include \"cpu_codegen/prelude/([a-z_]+\\.h)\"" "\\1" name "${line}")
  file(READ "${dir}/${name}" part)
  string(REPLACE "${line}" "${part}" content "${content}")
endforeach()
string(FIND "${content}" ")cppi_prelude\"" clash)
if(NOT clash EQUAL -1)
  message(FATAL_ERROR "${INPUT} contains the raw-string delimiter )cppi_prelude\"")
endif()
file(WRITE "${OUTPUT}.tmp"
  "// Generated from cpu_codegen/prelude/cppinductor_prelude.h by embed_prelude.cmake.\n"
  "namespace cppi::cpu {\n"
  "extern const char* const k_prelude_text;\n"
  "const char* const k_prelude_text = R\"cppi_prelude(${content})cppi_prelude\";\n"
  "}  // namespace cppi::cpu\n")
file(RENAME "${OUTPUT}.tmp" "${OUTPUT}")
