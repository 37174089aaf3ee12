# `cmake --install BUILD [--prefix P]` and `cpack -G DEB` (docs/install.md):
# - the layers' static libraries, an umbrella shardtrain::shardtrain, the
#   shared library (shardtrain::shardtrain_shared, cmake/shared_library.cmake), and a
#   CMake package (shardtrainConfig.cmake, with its version file) that finds
#   their dependencies as this build did;
# - the public interface's headers ("shardtrain/train.h"), and every header
#   under include/shardtrain/ at its path in the tree ("runtime/train/trainer.h");
# - the program, the launchers and tools it runs from its own folder, the
#   examples and the docs.
include(CMakePackageConfigHelpers)

# The umbrella: every layer up to training. `shardtrain` is the program's
# name, so the target is named otherwise and exported as shardtrain::shardtrain.
add_library(shardtrain_runtime INTERFACE)
target_link_libraries(shardtrain_runtime INTERFACE shardtrain_train)
# mpi.h without Open MPI's and MPICH's deprecated C++ bindings, as here.
target_compile_definitions(shardtrain_runtime INTERFACE OMPI_SKIP_MPICXX=1 MPICH_SKIP_MPICXX=1)
set_target_properties(shardtrain_runtime PROPERTIES EXPORT_NAME shardtrain)

get_property(shardtrain_libraries GLOBAL PROPERTY SHARDTRAIN_LIBRARIES)
install(TARGETS shardtrain_runtime ${shardtrain_libraries} EXPORT shardtrainTargets
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}/shardtrain COMPONENT dev)
if(TARGET shardtrain_shared)  # libshardtrain.so, and its links by version, in lib/
  install(TARGETS shardtrain_shared EXPORT shardtrainTargets
          LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT runtime NAMELINK_COMPONENT dev)
endif()
set(shardtrain_cmake_dir ${CMAKE_INSTALL_LIBDIR}/cmake/shardtrain)
install(EXPORT shardtrainTargets NAMESPACE shardtrain:: DESTINATION ${shardtrain_cmake_dir} COMPONENT dev)
configure_package_config_file(${CMAKE_CURRENT_LIST_DIR}/shardtrainConfig.cmake.in
                              ${CMAKE_BINARY_DIR}/shardtrainConfig.cmake INSTALL_DESTINATION ${shardtrain_cmake_dir})
# Static libraries of a 0.x runtime: only the same minor version is compatible.
write_basic_package_version_file(${CMAKE_BINARY_DIR}/shardtrainConfigVersion.cmake COMPATIBILITY SameMinorVersion)
install(FILES ${CMAKE_BINARY_DIR}/shardtrainConfig.cmake ${CMAKE_BINARY_DIR}/shardtrainConfigVersion.cmake
              ${CMAKE_CURRENT_LIST_DIR}/shardtrain_find_dependencies.cmake
        DESTINATION ${shardtrain_cmake_dir} COMPONENT dev)

# The public interface (include/shardtrain/*.h: "shardtrain/train.h"), and
# every header of the tree, which those include.
install(DIRECTORY ${PROJECT_SOURCE_DIR}/include/shardtrain DESTINATION ${CMAKE_INSTALL_INCLUDEDIR} COMPONENT dev)
foreach(dir runtime kernels io)
  install(DIRECTORY ${PROJECT_SOURCE_DIR}/${dir} DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/shardtrain COMPONENT dev
          FILES_MATCHING PATTERN "*.h" PATTERN "*.cuh")
endforeach()

# The program finds its Python tools and launchers next to itself, as in
# build/bin: they go to bin/ with it (not the tests' and benchmarks'
# programs, nor the test-only launchers).
install(TARGETS shardtrain RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR} COMPONENT runtime)
install(PROGRAMS launch/shardrun launch/fabric-env launch/supervise launch/failure-summary launch/emunodes
                 launch/emunodes-rsh launch/memlimit
        DESTINATION ${CMAKE_INSTALL_BINDIR} COMPONENT runtime)
install(FILES ${CMAKE_BINARY_DIR}/bin/shardtrain_report.py ${CMAKE_BINARY_DIR}/bin/shardtrain_ttt.py
              ${CMAKE_BINARY_DIR}/bin/shardtrain_study.py
        DESTINATION ${CMAKE_INSTALL_BINDIR} COMPONENT runtime)
install(DIRECTORY ${CMAKE_BINARY_DIR}/bin/study DESTINATION ${CMAKE_INSTALL_BINDIR} COMPONENT runtime)
install(DIRECTORY examples/ DESTINATION ${CMAKE_INSTALL_DATADIR}/shardtrain/examples COMPONENT runtime)
install(DIRECTORY docs/ DESTINATION ${CMAKE_INSTALL_DOCDIR} COMPONENT runtime)
install(FILES README.md DESTINATION ${CMAKE_INSTALL_DOCDIR} COMPONENT runtime)

# A Debian package of everything above: `cpack -G DEB` in the build folder.
set(CPACK_PACKAGE_NAME shardtrain)
set(CPACK_PACKAGE_VENDOR shardtrain)
set(CPACK_PACKAGE_CONTACT "shardtrain developers <shardtrain@localhost>")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "Distributed training runtime over MPI: DDP, ZeRO and FSDP, with telemetry")
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
# What the program and the package's CMake users need, by Debian's names
# (scripts/install-deps.sh installs the same for a build).
set(CPACK_DEBIAN_PACKAGE_DEPENDS
    "openmpi-bin, libopenmpi-dev, libhdf5-openmpi-dev, libopenblas-dev, libdnnl-dev, libdeflate-dev, libfmt-dev, libtomlplusplus-dev, nlohmann-json3-dev, zlib1g-dev, libcurl4-openssl-dev, libssl-dev, python3, python3-numpy")
set(CPACK_DEBIAN_PACKAGE_SECTION science)
include(CPack)
