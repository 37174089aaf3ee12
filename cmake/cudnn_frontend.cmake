# cuDNN's C++ frontend (header-only, PyPI's nvidia-cudnn-frontend, which
# scripts/install-deps.sh puts in .venv/cudnn-frontend) and cuDNN's own
# headers (the CUDA toolkit's). Both found: the CUDA backend gets cuDNN's
# fused attention, with cuDNN loaded at run time (dlopen) rather than linked,
# so a machine without cuDNN still runs everything else. Either missing: the
# materialized attention kernels only.
set(SHARDTRAIN_CUDNN_FRONTEND_INCLUDE "" CACHE PATH "Folder holding cudnn_frontend.h (default: .venv/cudnn-frontend)")
set(SHARDTRAIN_HAVE_CUDNN_FRONTEND OFF)
if(NOT SHARDTRAIN_CUDNN_FRONTEND_INCLUDE)
  file(GLOB _st_frontend_headers ${PROJECT_SOURCE_DIR}/.venv/cudnn-frontend/lib/python3*/site-packages/include/cudnn_frontend.h)
  if(_st_frontend_headers)
    list(GET _st_frontend_headers 0 _st_frontend_header)
    get_filename_component(_st_frontend_dir ${_st_frontend_header} DIRECTORY)
    set(SHARDTRAIN_CUDNN_FRONTEND_INCLUDE ${_st_frontend_dir} CACHE PATH "Folder holding cudnn_frontend.h" FORCE)
  endif()
endif()
find_path(SHARDTRAIN_CUDNN_INCLUDE cudnn.h HINTS ${CUDAToolkit_INCLUDE_DIRS})
if(SHARDTRAIN_CUDNN_FRONTEND_INCLUDE AND EXISTS ${SHARDTRAIN_CUDNN_FRONTEND_INCLUDE}/cudnn_frontend.h
   AND SHARDTRAIN_CUDNN_INCLUDE)
  set(SHARDTRAIN_HAVE_CUDNN_FRONTEND ON)
  message(STATUS "shardtrain: cuDNN fused attention ON (frontend ${SHARDTRAIN_CUDNN_FRONTEND_INCLUDE})")
else()
  message(STATUS "shardtrain: cuDNN fused attention OFF (no cudnn_frontend.h or cudnn.h; scripts/install-deps.sh installs the frontend)")
endif()
