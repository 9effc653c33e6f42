# Install rules for the SDK: the public headers, the CMake package
# (find_package(weft) -> weft::sdk, weft::weft) and the pkg-config file.
# libweft, the CLI and the built-in plugins install themselves
# (cmake/weft.cmake, apps/weft). Included by the top-level CMakeLists.txt
# after every target exists.
include(CMakePackageConfigHelpers)

# The plugin ABI version, from the header that defines it.
file(STRINGS ${CMAKE_SOURCE_DIR}/sdk/include/weft/plugin.h _weft_abi
  REGEX "^#define WEFT_ABI_(MAJOR|MINOR) [0-9]+")
string(REGEX REPLACE ".*WEFT_ABI_MAJOR ([0-9]+).*" "\\1" WEFT_ABI_MAJOR "${_weft_abi}")
string(REGEX REPLACE ".*WEFT_ABI_MINOR ([0-9]+).*" "\\1" WEFT_ABI_MINOR "${_weft_abi}")

set(WEFT_CMAKE_INSTALL_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/weft)
set(WEFT_PLUGIN_INSTALL_REL ${CMAKE_INSTALL_LIBDIR}/weft/plugins)

install(DIRECTORY ${CMAKE_SOURCE_DIR}/sdk/include/weft
  DESTINATION ${CMAKE_INSTALL_INCLUDEDIR} FILES_MATCHING PATTERN "*.h")

set_target_properties(weft_sdk PROPERTIES EXPORT_NAME sdk)
install(TARGETS weft_sdk EXPORT weftTargets)
install(EXPORT weftTargets NAMESPACE weft:: DESTINATION ${WEFT_CMAKE_INSTALL_DIR})

configure_package_config_file(${CMAKE_SOURCE_DIR}/sdk/cmake/weftConfig.cmake.in
  ${CMAKE_BINARY_DIR}/sdk/weftConfig.cmake
  INSTALL_DESTINATION ${WEFT_CMAKE_INSTALL_DIR}
  PATH_VARS CMAKE_INSTALL_INCLUDEDIR WEFT_PLUGIN_INSTALL_REL)
# 0.x: a minor release may change the SDK, so only the same minor matches.
write_basic_package_version_file(${CMAKE_BINARY_DIR}/sdk/weftConfigVersion.cmake
  VERSION ${PROJECT_VERSION} COMPATIBILITY SameMinorVersion)
install(FILES ${CMAKE_BINARY_DIR}/sdk/weftConfig.cmake
  ${CMAKE_BINARY_DIR}/sdk/weftConfigVersion.cmake
  DESTINATION ${WEFT_CMAKE_INSTALL_DIR})

# weft.pc lives in LIBDIR/pkgconfig; its prefix is found from there.
file(RELATIVE_PATH WEFT_PC_TO_PREFIX /_/${CMAKE_INSTALL_LIBDIR}/pkgconfig /_)
string(REGEX REPLACE "/$" "" WEFT_PC_TO_PREFIX "${WEFT_PC_TO_PREFIX}")
configure_file(${CMAKE_SOURCE_DIR}/sdk/pkgconfig/weft.pc.in
  ${CMAKE_BINARY_DIR}/sdk/weft.pc @ONLY)
install(FILES ${CMAKE_BINARY_DIR}/sdk/weft.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
