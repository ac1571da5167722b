# Sources of the checkpoint module, the file format layer (include()d from
# src/CMakeLists.txt).
#
# Everything that touches HDF5 is compiled only with the HDF5 feature. The
# library links the parallel HDF5 directly (PRIVATE): being a direct
# dependency of libaccelerate-hpc puts it ahead of any HDF5 that LibTorch
# pulls in indirectly (Debian's libtorch_cpu -> libgdal -> libhdf5_serial)
# in the loader's search order; see hdf5_binding.hpp for why that matters
# and how it is checked at run time.
set(_checkpoint_dir ${CMAKE_CURRENT_LIST_DIR})
target_sources(accelerate PRIVATE
  ${_checkpoint_dir}/names.cpp
  ${_checkpoint_dir}/checkpoint_directory.cpp
  ${_checkpoint_dir}/key_report.cpp
  ${_checkpoint_dir}/safetensors.cpp
  ${_checkpoint_dir}/save_load.cpp
  ${_checkpoint_dir}/safetensors_format.cpp
  ${_checkpoint_dir}/manifest.cpp
  ${_checkpoint_dir}/timestamp.cpp
  ${_checkpoint_dir}/spare_core.cpp
)
if(ACCELERATE_HAVE_HDF5)
  target_sources(accelerate PRIVATE
    ${_checkpoint_dir}/attributes.cpp
    ${_checkpoint_dir}/checkpoint_reader.cpp
    ${_checkpoint_dir}/checkpoint_writer.cpp
    ${_checkpoint_dir}/tensor_pieces.cpp
    ${_checkpoint_dir}/collective.cpp
    ${_checkpoint_dir}/direct_read.cpp
    ${_checkpoint_dir}/entry_index.cpp
    ${_checkpoint_dir}/hdf5_binding.cpp
    ${_checkpoint_dir}/hdf5_types.cpp
    ${_checkpoint_dir}/hdf5_turn.cpp
    ${_checkpoint_dir}/layout.cpp
    ${_checkpoint_dir}/parallel_file.cpp
  )
  target_link_libraries(accelerate PRIVATE HDF5::HDF5 ${CMAKE_DL_LIBS})
else()
  # The same API, throwing FeatureNotBuilt: programs link either way.
  target_sources(accelerate PRIVATE ${_checkpoint_dir}/without_hdf5.cpp)
endif()
