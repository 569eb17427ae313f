# The C++ package (docs/cpp-package.md). `cmake --install build --prefix P` installs the public
# headers (P/include/tandem), the static libraries and the tokenizer module
# libtandem_sentencepiece.so (P/lib), the `tandem` program (P/bin) and
# P/lib/cmake/tandem/tandemConfig.cmake with its version file and exported targets, so that
# another project builds against tandem with
#   find_package(tandem REQUIRED)
#   target_link_libraries(app PRIVATE tandem::tandem)
# tandem::tandem is the training API (core, data, nn, optim, comm and train, e.g.
# tandem::train); tandem::metrics and tandem::serve are exported beside it. tandemConfig.cmake
# finds the Debian packages those libraries link (cmake/tandemConfig.cmake.in).
include(CMakePackageConfigHelpers)

add_library(tandem_package INTERFACE)
target_link_libraries(tandem_package INTERFACE tandem_train)
set_target_properties(tandem_package PROPERTIES EXPORT_NAME tandem)
add_library(tandem::tandem ALIAS tandem_package)

set(TANDEM_EXPORTED tandem_core tandem_data tandem_nn tandem_storage tandem_optim tandem_comm tandem_train tandem_metrics
                    tandem_serve)
if(TANDEM_CUDA)
  list(APPEND TANDEM_EXPORTED tandem_cuda_kernels)
endif()
foreach(t ${TANDEM_EXPORTED})
  string(REGEX REPLACE "^tandem_" "" short ${t})
  set_target_properties(${t} PROPERTIES EXPORT_NAME ${short})  # tandem::core, tandem::train, ...
endforeach()

set(TANDEM_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/tandem)
install(TARGETS ${TANDEM_EXPORTED} tandem_package EXPORT tandemTargets
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})
# The tokenizer module (dlopen'd, so outside the exported targets), found by an installed
# bin/tandem in ../lib.
install(TARGETS tandem_sentencepiece LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})
if(TARGET tandem)
  install(TARGETS tandem RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
endif()
install(DIRECTORY ${CMAKE_SOURCE_DIR}/include/tandem DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(EXPORT tandemTargets NAMESPACE tandem:: DESTINATION ${TANDEM_CMAKE_DIR})
configure_package_config_file(${CMAKE_SOURCE_DIR}/cmake/tandemConfig.cmake.in
                              ${CMAKE_BINARY_DIR}/package/tandemConfig.cmake INSTALL_DESTINATION ${TANDEM_CMAKE_DIR})
# 0.x: a minor version may change the API, so only the same major.minor is compatible.
write_basic_package_version_file(${CMAKE_BINARY_DIR}/package/tandemConfigVersion.cmake VERSION ${PROJECT_VERSION}
                                 COMPATIBILITY SameMinorVersion)
install(FILES ${CMAKE_BINARY_DIR}/package/tandemConfig.cmake ${CMAKE_BINARY_DIR}/package/tandemConfigVersion.cmake
        DESTINATION ${TANDEM_CMAKE_DIR})
