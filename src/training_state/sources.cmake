# Sources of the training_state module (include()d from src/CMakeLists.txt):
# which training object keeps which state, mapped onto the checkpoint layer's
# files. Without HDF5 the same API throws FeatureNotBuilt.
set(_training_state_dir ${CMAKE_CURRENT_LIST_DIR})
target_sources(accelerate PRIVATE
  ${_training_state_dir}/project_configuration.cpp
  ${_training_state_dir}/module_state.cpp
)
if(ACCELERATE_HAVE_HDF5)
  target_sources(accelerate PRIVATE
    ${_training_state_dir}/optimizer_state.cpp
    ${_training_state_dir}/training_checkpoint.cpp
    ${_training_state_dir}/state_snapshot.cpp
    ${_training_state_dir}/async_state_saver.cpp
  )
else()
  target_sources(accelerate PRIVATE ${_training_state_dir}/without_hdf5.cpp)
endif()
