# Warnings on and clean for shardtrain's own targets (not for third-party code).
# -Wnull-dereference is left out: GCC 12 reports false positives at -O3 inside
# inlined standard-library code.
add_library(shardtrain_warnings INTERFACE)
target_compile_options(shardtrain_warnings INTERFACE
  $<$<COMPILE_LANGUAGE:CXX>:-Wall -Wextra -Wpedantic -Wshadow -Wnon-virtual-dtor
                            -Wcast-align -Wformat=2>)

# shardtrain_library(NAME [SUBDIRS dir...] DEPS...) makes a static library of
# every .cpp (and .cu) file in the calling folder and the SUBDIRS named: one
# idea per file, and adding a file needs no CMake edit.
function(shardtrain_library name)
  cmake_parse_arguments(ARG "" "" "DEPS;SUBDIRS" ${ARGN})
  set(patterns ${CMAKE_CURRENT_SOURCE_DIR}/*.cpp ${CMAKE_CURRENT_SOURCE_DIR}/*.cu)
  foreach(sub IN LISTS ARG_SUBDIRS)  # folders that group a layer's files, not layers of their own
    list(APPEND patterns ${CMAKE_CURRENT_SOURCE_DIR}/${sub}/*.cpp ${CMAKE_CURRENT_SOURCE_DIR}/${sub}/*.cu)
  endforeach()
  file(GLOB sources CONFIGURE_DEPENDS ${patterns})
  list(FILTER sources EXCLUDE REGEX "/main\\.cpp$")
  # Headers are included by their path in the tree ("runtime/core/tensor.h"),
  # installed under include/shardtrain/ with the same paths; the public
  # interface's headers (include/shardtrain/*.h) as "shardtrain/train.h"
  # (cmake/install.cmake).
  set(includes $<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}> $<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}/include>
               $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}/shardtrain> $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>)
  set_property(GLOBAL APPEND PROPERTY SHARDTRAIN_LIBRARIES ${name})
  if(NOT sources)  # a header-only layer
    add_library(${name} INTERFACE)
    target_include_directories(${name} INTERFACE ${includes})
    target_link_libraries(${name} INTERFACE ${ARG_DEPS})
    return()
  endif()
  add_library(${name} STATIC ${sources})
  target_include_directories(${name} PUBLIC ${includes})
  target_link_libraries(${name} PUBLIC ${ARG_DEPS} PRIVATE $<BUILD_INTERFACE:shardtrain_warnings>)
endfunction()
