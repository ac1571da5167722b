# Sources of the tracking module (include()d from src/CMakeLists.txt).
set(_tracking_dir ${CMAKE_CURRENT_LIST_DIR})
target_sources(accelerate PRIVATE
  ${_tracking_dir}/file_trackers.cpp
  ${_tracking_dir}/run_directory.cpp
  ${_tracking_dir}/tracker.cpp
  ${_tracking_dir}/tracker_set.cpp)
if(ACCELERATE_HAVE_TENSORBOARD)
  # protoc turns our .proto into tensorboard_event.pb.{h,cc} in the build tree.
  protobuf_generate_cpp(_tensorboard_sources _tensorboard_headers ${_tracking_dir}/tensorboard_event.proto)
  # Generated code: not ours to warn about, and not worth LibTorch's precompiled header.
  set_source_files_properties(${_tensorboard_sources} PROPERTIES COMPILE_OPTIONS "-w" SKIP_PRECOMPILE_HEADERS ON)
  target_sources(accelerate PRIVATE
    ${_tracking_dir}/event_file.cpp
    ${_tracking_dir}/tensorboard_tracker.cpp
    ${_tensorboard_sources} ${_tensorboard_headers})
  target_include_directories(accelerate PRIVATE ${CMAKE_CURRENT_BINARY_DIR})
  target_link_libraries(accelerate PRIVATE protobuf::libprotobuf-lite)
  # For `accelerate-hpc env`; on this one file, so a protobuf upgrade rebuilds one file.
  set_property(SOURCE ${CMAKE_CURRENT_SOURCE_DIR}/runtime/build_info.cpp APPEND PROPERTY
    COMPILE_DEFINITIONS ACCELERATE_PROTOBUF_VERSION="${Protobuf_VERSION}")
else()
  target_sources(accelerate PRIVATE ${_tracking_dir}/without_tensorboard.cpp)
endif()
