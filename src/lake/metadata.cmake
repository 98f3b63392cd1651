# Iceberg table metadata: types and schemas, transforms, single-value serialization, table
# metadata JSON and REST catalog commits (docs/design/0008-iceberg-metadata.md).
find_package(nlohmann_json 3 REQUIRED)

sluice_library(lake_metadata
  SRCS
    ${CMAKE_CURRENT_LIST_DIR}/iceberg_json.cc
    ${CMAKE_CURRENT_LIST_DIR}/iceberg_schema.cc
    ${CMAKE_CURRENT_LIST_DIR}/single_value.cc
    ${CMAKE_CURRENT_LIST_DIR}/transforms.cc
    ${CMAKE_CURRENT_LIST_DIR}/table_metadata.cc
    ${CMAKE_CURRENT_LIST_DIR}/table_update.cc
  DEPS sluice_base nlohmann_json::nlohmann_json)

sluice_test(lake_metadata_test
  SRCS
    ${CMAKE_CURRENT_LIST_DIR}/tests/iceberg_schema_test.cc
    ${CMAKE_CURRENT_LIST_DIR}/tests/single_value_test.cc
    ${CMAKE_CURRENT_LIST_DIR}/tests/transforms_test.cc
    ${CMAKE_CURRENT_LIST_DIR}/tests/table_metadata_test.cc
    ${CMAKE_CURRENT_LIST_DIR}/tests/table_update_test.cc
  DEPS sluice_lake_metadata
  LABELS unit)
