# WEFT_HAVE_TARGET_CLONES: whether a function multiversioned with
# __attribute__((target_clones)) can be called by its plain name from
# another file. GCC names the ifunc after the function; clang 14 names it
# "f.ifunc" and leaves "f" undefined, so kernels called through the CPU
# table from another file (cpu_table.c) would not link. The kernels and
# the CPU kernels then compile one portable version of their hot loops
# (kernels/cpu/cpu_impl.h). Static multiversioned functions, called only
# in their own file, work with both.
set(_tc_dir ${CMAKE_BINARY_DIR}/CMakeFiles/target_clones_probe)
file(WRITE ${_tc_dir}/clone.c
  "__attribute__((target_clones(\"arch=x86-64-v4\", \"arch=x86-64-v3\", \"default\")))\n"
  "int weft_probe_twice(int x) { return 2 * x; }\n")
file(WRITE ${_tc_dir}/main.c
  "int weft_probe_twice(int x);\n"
  "int main(void) { return weft_probe_twice(0); }\n")
try_compile(WEFT_HAVE_TARGET_CLONES ${_tc_dir}/build
  SOURCES ${_tc_dir}/clone.c ${_tc_dir}/main.c
  OUTPUT_VARIABLE _tc_out)
if(NOT WEFT_HAVE_TARGET_CLONES)
  message(STATUS "target_clones cannot be called across files with this compiler: "
    "hot loops get one portable version")
endif()
