# training tests (include()d from CMakeLists.txt here).
accelerate_add_unit_test(accelerator_options_test
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/accelerator_options_test.cpp LABELS training)
# Learning-rate schedules with warm-up (transformers' get_scheduler).
accelerate_add_unit_test(lr_schedules_test
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/lr_schedules_test.cpp LABELS training)
# FlatParameters and FusedSGD/FusedAdam/FusedAdamW against torch::optim's SGD, Adam and AdamW.
accelerate_add_unit_test(fused_optimizers_test
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/fused_optimizers_test.cpp LABELS training)
