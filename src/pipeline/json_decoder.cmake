# JSON decoding into DuckDB vectors (docs/design/0005-json-decoding.md). Included from
# src/pipeline/CMakeLists.txt.
sluice_library(pipeline_decode
  SRCS json_decoder.cc
  DEPS sluice_duck sluice_kafka_client simdjson::simdjson)

sluice_test(json_decoder_test
  SRCS tests/json_decoder_test.cc
  DEPS sluice_pipeline_decode
  LABELS unit)

# Not a test: `decode_bench [structured|inferred]` measures decode + handler SQL (release).
add_executable(decode_bench tests/decode_bench.cc)
target_link_libraries(decode_bench PRIVATE sluice_pipeline_decode)
target_compile_options(decode_bench PRIVATE ${SLUICE_WARNINGS})
