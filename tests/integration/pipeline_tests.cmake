find_package(nlohmann_json 3 REQUIRED)  # the Iceberg tests read metadata JSON
# `sluice pipeline run` end to end: the real binary as a child process
# against `sluice serve`, real PostgreSQL, results checked against DuckDB over the same
# input. One binary; the seeded SIGKILL crash test is its own ctest test so that ctest -j
# can run it beside the rest.
add_executable(pipeline_test ${_it}/pipeline_test.cc ${_it}/sluice_process.cc)
target_include_directories(pipeline_test PRIVATE ${_it})
target_link_libraries(pipeline_test PRIVATE sluice_sinks_testing sluice_duck sluice_kafka_client sluice_base
                      PkgConfig::RDKAFKA nlohmann_json::nlohmann_json GTest::gtest GTest::gtest_main)
target_compile_options(pipeline_test PRIVATE ${SLUICE_WARNINGS})
add_dependencies(pipeline_test sluice)
add_test(NAME pipeline_test COMMAND pipeline_test --gtest_filter=-PipelineCrashTest.*:PipelineWindowCrashTest.*:PipelineIcebergCrashTest.*:PipelineIcebergS3Test.*:PipelineIcebergRestTest.*)
add_test(NAME pipeline_crash_test COMMAND pipeline_test --gtest_filter=PipelineCrashTest.*)
add_test(NAME pipeline_window_crash_test COMMAND pipeline_test --gtest_filter=PipelineWindowCrashTest.*)
add_test(NAME pipeline_iceberg_crash_test COMMAND pipeline_test --gtest_filter=PipelineIcebergCrashTest.*)
# Pipelines through an Iceberg REST catalog (a second `sluice serve`, issue 26).
add_test(NAME pipeline_rest_catalog_test COMMAND pipeline_test --gtest_filter=PipelineIcebergRestTest.*)
set_tests_properties(pipeline_test pipeline_crash_test pipeline_window_crash_test pipeline_iceberg_crash_test
  pipeline_rest_catalog_test PROPERTIES
  LABELS integration TIMEOUT 300 ENVIRONMENT "SLUICE_BINARY=$<TARGET_FILE:sluice>")
set_tests_properties(pipeline_test PROPERTIES PROCESSORS 2)  # a core busy (docs/design/0029 #5)
# Iceberg tables on S3 (issue 26): radosgw started by the script, then the S3 tests.
add_test(NAME pipeline_s3_test
  COMMAND bash ${_it}/pipeline_s3_test.sh $<TARGET_FILE:pipeline_test> --gtest_filter=PipelineIcebergS3Test.*)
set_tests_properties(pipeline_s3_test PROPERTIES
  LABELS integration TIMEOUT 600 ENVIRONMENT "SLUICE_BINARY=$<TARGET_FILE:sluice>")
