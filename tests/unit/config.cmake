# Configuration file and `accelerate-hpc config` (include()d from CMakeLists.txt here).
accelerate_add_unit_test(config_file_test SOURCES ${CMAKE_CURRENT_LIST_DIR}/config_file_test.cpp TIMEOUT 60)

# The command-line tool writes a file that `config show` (load_config_file) reads back.
if(TARGET accelerate_cli)
  add_test(NAME config_command
    COMMAND ${PROJECT_SOURCE_DIR}/tests/integration/config_command_test.sh $<TARGET_FILE:accelerate_cli>)
  set_tests_properties(config_command PROPERTIES TIMEOUT 60 LABELS "integration")
  # The generated --help and the bash completion script.
  add_test(NAME cli_help_completion
    COMMAND ${PROJECT_SOURCE_DIR}/tests/integration/cli_help_completion_test.sh $<TARGET_FILE:accelerate_cli>)
  set_tests_properties(cli_help_completion PROPERTIES TIMEOUT 60 LABELS "integration")
endif()
