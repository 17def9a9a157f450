# Writes OUTPUT, a C++ file holding INPUT (the prelude header) as a string, so
# the library carries the prelude and kernels never read it from disk.
file(READ "${INPUT}" content)
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
