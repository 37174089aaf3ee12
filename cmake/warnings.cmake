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
  if(NOT sources)  # a header-only layer
    add_library(${name} INTERFACE)
    target_include_directories(${name} INTERFACE ${PROJECT_SOURCE_DIR})
    target_link_libraries(${name} INTERFACE ${ARG_DEPS})
    return()
  endif()
  add_library(${name} STATIC ${sources})
  target_include_directories(${name} PUBLIC ${PROJECT_SOURCE_DIR})
  target_link_libraries(${name} PUBLIC ${ARG_DEPS} PRIVATE shardtrain_warnings)
endfunction()
