# The cluster controller's part of src/cluster (docs/design/0018-cluster.md): the etcd
# values as C++ types with their JSON, and the controller's decisions as pure functions.
# metadata_txn turns a decision's write into the etcd client's transaction.
find_package(nlohmann_json 3 REQUIRED)

sluice_library(cluster_control
  SRCS
    ${CMAKE_CURRENT_LIST_DIR}/cluster_values.cc
    ${CMAKE_CURRENT_LIST_DIR}/controller_decisions.cc
    ${CMAKE_CURRENT_LIST_DIR}/metadata_txn.cc
  DEPS sluice_base sluice_cluster nlohmann_json::nlohmann_json)

sluice_test(cluster_control_test
  SRCS
    ${CMAKE_CURRENT_LIST_DIR}/tests/cluster_values_test.cc
    ${CMAKE_CURRENT_LIST_DIR}/tests/controller_decisions_test.cc
  DEPS sluice_cluster_control
  LABELS unit)

# The decisions' writes against a real etcd (/usr/bin/etcd on loopback; skipped without it):
# the fencing of stale reads and replaced controllers by etcd's own compare-and-swap.
sluice_test(cluster_control_etcd_test
  SRCS
    ${CMAKE_CURRENT_LIST_DIR}/tests/controller_writes_etcd_test.cc
  DEPS sluice_cluster_control sluice_cluster sluice_cluster_testing
  LABELS unit
  TIMEOUT 120)
