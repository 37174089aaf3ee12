# libshardtrain.so: the layers up to training (what shardtrain::shardtrain
# links statically) in one shared library, exported as
# shardtrain::shardtrain_shared (docs/install.md). It is made of the static
# layers' own objects, linked whole (so every layer is built once, with
# position-independent code: CMAKE_POSITION_INDEPENDENT_CODE in the top
# CMakeLists.txt), and it must resolve every symbol itself (--no-undefined,
# but in a sanitizer's build).
get_property(shardtrain_libraries GLOBAL PROPERTY SHARDTRAIN_LIBRARIES)
set(shardtrain_shared_archives)
set(shardtrain_shared_deps)
foreach(lib IN LISTS shardtrain_libraries)
  get_target_property(type ${lib} TYPE)
  if(NOT type STREQUAL "STATIC_LIBRARY" OR lib STREQUAL "shardtrain_bench_commands")  # bench is above training
    continue()
  endif()
  list(APPEND shardtrain_shared_archives ${lib})
  # What the layers' headers and code need from outside: their usage
  # requirements, without the layers themselves (those are in the library).
  get_target_property(deps ${lib} INTERFACE_LINK_LIBRARIES)
  foreach(dep IN LISTS deps)
    if(dep AND NOT dep MATCHES "^shardtrain_[a-z_]+$")  # not a layer
      list(APPEND shardtrain_shared_deps ${dep})
    endif()
  endforeach()
endforeach()
list(REMOVE_DUPLICATES shardtrain_shared_deps)

# A shared library needs a source of its own; everything else comes whole
# from the archives.
set(shardtrain_shared_source ${CMAKE_BINARY_DIR}/shardtrain_shared.cpp)
file(WRITE ${shardtrain_shared_source} "// libshardtrain.so: its code comes from the layers' archives.\n")
add_library(shardtrain_shared SHARED ${shardtrain_shared_source})
# The archives by path between --whole-archive flags (CMake's WHOLE_ARCHIVE
# feature refuses archives that other archives of the set link again).
set(shardtrain_shared_files)
foreach(lib IN LISTS shardtrain_shared_archives)
  list(APPEND shardtrain_shared_files $<TARGET_FILE:${lib}>)
endforeach()
add_dependencies(shardtrain_shared ${shardtrain_shared_archives})
target_link_libraries(shardtrain_shared PRIVATE -Wl,--whole-archive ${shardtrain_shared_files} -Wl,--no-whole-archive
                      PUBLIC ${shardtrain_shared_deps})
if(NOT SHARDTRAIN_SANITIZE)  # a sanitizer's runtime is the program's to link, not a library's
  target_link_options(shardtrain_shared PRIVATE LINKER:--no-undefined)
endif()
target_include_directories(shardtrain_shared INTERFACE $<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}>
                                                       $<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}/include>
                                                       $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}/shardtrain>
                                                       $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>)
target_compile_definitions(shardtrain_shared INTERFACE OMPI_SKIP_MPICXX=1 MPICH_SKIP_MPICXX=1)
set_target_properties(shardtrain_shared PROPERTIES OUTPUT_NAME shardtrain VERSION ${PROJECT_VERSION}
                      SOVERSION ${PROJECT_VERSION_MAJOR}.${PROJECT_VERSION_MINOR})
