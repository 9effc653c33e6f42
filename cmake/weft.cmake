# Helpers shared by every CMakeLists.txt in the tree.

# weft_core_subsystem(NAME SOURCES a.c b.c [LIBS x y])
# A core subsystem: static PIC library weft_NAME, part of libweft.so.
# Compiled with hidden visibility: libweft.so exports only what the SDK
# headers declare WEFT_API (tests/structure checks it); the weft program,
# the tests and the benchmarks link these libraries themselves to reach
# the internals.
function(weft_core_subsystem name)
  cmake_parse_arguments(A "" "" "SOURCES;LIBS" ${ARGN})
  add_library(weft_${name} STATIC ${A_SOURCES})
  target_link_libraries(weft_${name} PUBLIC weft_sdk ${A_LIBS})
  target_include_directories(weft_${name} PUBLIC ${CMAKE_SOURCE_DIR}/core)
  set_target_properties(weft_${name} PROPERTIES C_VISIBILITY_PRESET hidden
    CXX_VISIBILITY_PRESET hidden)
  target_compile_definitions(weft_${name} PRIVATE
    WEFT_BUILD_PLUGIN_DIR="${WEFT_PLUGIN_DIR}"
    WEFT_INSTALL_PLUGIN_DIR="${WEFT_INSTALL_PLUGIN_DIR}")
  set_property(GLOBAL APPEND PROPERTY WEFT_CORE_LIBS weft_${name})
endfunction()

# libweft.so: every core subsystem, whole.
function(weft_add_core_library)
  get_property(libs GLOBAL PROPERTY WEFT_CORE_LIBS)
  add_library(weft SHARED ${CMAKE_SOURCE_DIR}/core/weft_version.c)
  target_compile_definitions(weft PRIVATE WEFT_VERSION_STRING="${PROJECT_VERSION}")
  target_link_libraries(weft PUBLIC weft_sdk PRIVATE "-Wl,--whole-archive" ${libs} "-Wl,--no-whole-archive")
  foreach(l ${libs})
    get_target_property(deps ${l} INTERFACE_LINK_LIBRARIES)
    if(deps)
      target_link_libraries(weft PRIVATE ${deps})
    endif()
  endforeach()
  set_target_properties(weft PROPERTIES VERSION ${PROJECT_VERSION} SOVERSION ${PROJECT_VERSION_MAJOR}
    C_VISIBILITY_PRESET hidden LINK_DEPENDS ${CMAKE_SOURCE_DIR}/cmake/libweft.map)
  target_link_options(weft PRIVATE "LINKER:--version-script=${CMAKE_SOURCE_DIR}/cmake/libweft.map")
  install(TARGETS weft EXPORT weftTargets LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})
endfunction()

# weft_add_plugin(NAME SOURCES a.c [LIBS x])
# A plugin: a shared object NAME.so in the build's plugin directory. It
# links nothing of the core: everything it needs comes through the host
# services table (sdk/include/weft/plugin.h).
function(weft_add_plugin name)
  cmake_parse_arguments(A "" "OUTPUT_DIR" "SOURCES;LIBS" ${ARGN})
  add_library(${name} MODULE ${A_SOURCES})
  target_link_libraries(${name} PRIVATE weft_sdk ${A_LIBS})
  set(out ${WEFT_PLUGIN_DIR})
  if(A_OUTPUT_DIR)
    set(out ${A_OUTPUT_DIR})
  endif()
  set_target_properties(${name} PROPERTIES PREFIX "" LIBRARY_OUTPUT_DIRECTORY ${out}
    C_VISIBILITY_PRESET hidden CXX_VISIBILITY_PRESET hidden)
  target_link_options(${name} PRIVATE "-Wl,--no-undefined")
  if(NOT A_OUTPUT_DIR)
    install(TARGETS ${name} LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}/weft/plugins)
  endif()
  # tests/structure checks the objects of each product plugin (not the
  # tests' fixtures) for call cycles
  string(FIND "${CMAKE_CURRENT_SOURCE_DIR}/" "${CMAKE_SOURCE_DIR}/plugins/" at)
  if(at EQUAL 0)
    set_property(GLOBAL APPEND PROPERTY WEFT_PRODUCT_MODULES ${name})
  endif()
  # tests/structure checks that the plugins of plugins/ and examples/plugins/
  # (built in the tree by tests/sdk) see sdk/include alone
  set(boundary ${at})
  foreach(src ${A_SOURCES})
    get_filename_component(src ${src} ABSOLUTE BASE_DIR ${CMAKE_CURRENT_SOURCE_DIR})
    string(FIND "${src}" "${CMAKE_SOURCE_DIR}/examples/plugins/" ex)
    if(ex EQUAL 0)
      set(boundary 0)
    endif()
  endforeach()
  if(boundary EQUAL 0)
    set_property(GLOBAL APPEND PROPERTY WEFT_SDK_BOUNDARY_MODULES ${name})
  endif()
endfunction()

# weft_add_test(NAME SOURCES a.c LIBS weft_base ... [TIMEOUT s] [LABELS l])
function(weft_add_test name)
  cmake_parse_arguments(A "" "TIMEOUT" "SOURCES;LIBS;LABELS;ARGS" ${ARGN})
  add_executable(${name} ${A_SOURCES})
  target_link_libraries(${name} PRIVATE weft_sdk ${A_LIBS})
  target_include_directories(${name} PRIVATE ${CMAKE_SOURCE_DIR}/tests ${CMAKE_SOURCE_DIR}/core)
  set_target_properties(${name} PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/tests)
  add_test(NAME ${name} COMMAND ${name} ${A_ARGS} WORKING_DIRECTORY ${CMAKE_BINARY_DIR}/tests)
  set(t 120)
  if(A_TIMEOUT)
    set(t ${A_TIMEOUT})
  endif()
  set_tests_properties(${name} PROPERTIES TIMEOUT ${t}
    ENVIRONMENT "WEFT_SOURCE_DIR=${CMAKE_SOURCE_DIR};WEFT_BUILD_DIR=${CMAKE_BINARY_DIR};WEFT_PLUGIN_DIR=${WEFT_PLUGIN_DIR}")
  if(A_LABELS)
    set_tests_properties(${name} PROPERTIES LABELS "${A_LABELS}")
  endif()
endfunction()
