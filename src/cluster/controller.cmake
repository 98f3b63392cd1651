# The cluster controller's part of src/cluster (docs/design/0018-cluster.md): the etcd
# values as C++ types with their JSON, and the controller's decisions as pure functions.
# No etcd here: the broker's ClusterController runs them against the etcd client.
find_package(nlohmann_json 3 REQUIRED)

sluice_library(cluster_control
  SRCS
    ${CMAKE_CURRENT_LIST_DIR}/cluster_values.cc
    ${CMAKE_CURRENT_LIST_DIR}/controller_decisions.cc
  DEPS sluice_base nlohmann_json::nlohmann_json)

sluice_test(cluster_control_test
  SRCS
    ${CMAKE_CURRENT_LIST_DIR}/tests/cluster_values_test.cc
    ${CMAKE_CURRENT_LIST_DIR}/tests/controller_decisions_test.cc
  DEPS sluice_cluster_control
  LABELS unit)
