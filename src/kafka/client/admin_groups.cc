// Admin's consumer-group calls: ListConsumerGroups, DescribeConsumerGroups,
// ListConsumerGroupOffsets, AlterConsumerGroupOffsets, DeleteGroups.
#include <algorithm>

#include "kafka/client/admin.h"
#include "kafka/client/rdkafka_util.h"

namespace sluice::kafka::client {
namespace {

using detail::AdminOptionsPtr;
using detail::EventPtr;
using detail::MakeOptions;
using detail::QueuePtr;
using detail::WaitResult;

Status ErrorOf(const rd_kafka_error_t* error, std::string_view what) {
  if (error == nullptr) return Status::OK();
  const char* text = rd_kafka_error_string(error);
  return detail::ErrorStatus(rd_kafka_error_code(error), what, text != nullptr ? text : "");
}

// The partitions of a list, with their offsets; the first partition error fails it.
Result<std::vector<TopicPartition>> PartitionsOf(const rd_kafka_topic_partition_list_t* list,
                                                 std::string_view what) {
  std::vector<TopicPartition> out;
  if (list == nullptr) return out;
  for (int i = 0; i < list->cnt; ++i) {
    const rd_kafka_topic_partition_t& e = list->elems[i];
    RETURN_IF_ERROR(
        detail::ErrorStatus(e.err, fmt::format("{}: {} [{}]", what, e.topic, e.partition)));
    out.push_back({e.topic, e.partition, e.offset});
  }
  std::sort(out.begin(), out.end(), [](const TopicPartition& a, const TopicPartition& b) {
    return std::tie(a.topic, a.partition) < std::tie(b.topic, b.partition);
  });
  return out;
}

// The one group result of a group call, checked.
Result<const rd_kafka_group_result_t*> OneGroup(const rd_kafka_group_result_t** groups,
                                                size_t count, std::string_view what) {
  if (count != 1) return InternalError("{}: {} group results, not 1", what, count);
  RETURN_IF_ERROR(ErrorOf(rd_kafka_group_result_error(groups[0]), what));
  return groups[0];
}

}  // namespace

Result<std::vector<GroupListing>> Admin::ListGroups(std::chrono::milliseconds timeout) {
  const std::string what = "list consumer groups";
  ASSIGN_OR_RETURN(AdminOptionsPtr options,
                   MakeOptions(rk_.get(), RD_KAFKA_ADMIN_OP_LISTCONSUMERGROUPS, timeout, what));
  QueuePtr queue(rd_kafka_queue_new(rk_.get()));
  rd_kafka_ListConsumerGroups(rk_.get(), options.get(), queue.get());
  ASSIGN_OR_RETURN(EventPtr ev, WaitResult(queue.get(), timeout, what));
  const rd_kafka_ListConsumerGroups_result_t* result =
      rd_kafka_event_ListConsumerGroups_result(ev.get());
  if (result == nullptr)
    return InternalError("{}: unexpected event {}", what, rd_kafka_event_name(ev.get()));
  size_t errors = 0;
  const rd_kafka_error_t** errs = rd_kafka_ListConsumerGroups_result_errors(result, &errors);
  if (errors > 0) return ErrorOf(errs[0], what);
  size_t count = 0;
  const rd_kafka_ConsumerGroupListing_t** groups =
      rd_kafka_ListConsumerGroups_result_valid(result, &count);
  std::vector<GroupListing> out;
  for (size_t i = 0; i < count; ++i) {
    GroupListing g;
    g.group_id = rd_kafka_ConsumerGroupListing_group_id(groups[i]);
    g.state = rd_kafka_consumer_group_state_name(rd_kafka_ConsumerGroupListing_state(groups[i]));
    g.simple = rd_kafka_ConsumerGroupListing_is_simple_consumer_group(groups[i]) != 0;
    out.push_back(std::move(g));
  }
  std::sort(out.begin(), out.end(),
            [](const GroupListing& a, const GroupListing& b) { return a.group_id < b.group_id; });
  return out;
}

Result<GroupDescription> Admin::DescribeGroup(std::string_view group,
                                              std::chrono::milliseconds timeout) {
  const std::string what = fmt::format("describe group '{}'", group);
  const std::string id(group);
  ASSIGN_OR_RETURN(AdminOptionsPtr options,
                   MakeOptions(rk_.get(), RD_KAFKA_ADMIN_OP_DESCRIBECONSUMERGROUPS, timeout, what));
  QueuePtr queue(rd_kafka_queue_new(rk_.get()));
  const char* ids[] = {id.c_str()};
  rd_kafka_DescribeConsumerGroups(rk_.get(), ids, 1, options.get(), queue.get());
  ASSIGN_OR_RETURN(EventPtr ev, WaitResult(queue.get(), timeout, what));
  const rd_kafka_DescribeConsumerGroups_result_t* result =
      rd_kafka_event_DescribeConsumerGroups_result(ev.get());
  if (result == nullptr)
    return InternalError("{}: unexpected event {}", what, rd_kafka_event_name(ev.get()));
  size_t count = 0;
  const rd_kafka_ConsumerGroupDescription_t** groups =
      rd_kafka_DescribeConsumerGroups_result_groups(result, &count);
  if (count != 1) return InternalError("{}: {} descriptions, not 1", what, count);
  const rd_kafka_ConsumerGroupDescription_t* d = groups[0];
  RETURN_IF_ERROR(ErrorOf(rd_kafka_ConsumerGroupDescription_error(d), what));
  GroupDescription out;
  out.group_id = rd_kafka_ConsumerGroupDescription_group_id(d);
  out.state = rd_kafka_consumer_group_state_name(rd_kafka_ConsumerGroupDescription_state(d));
  if (const char* a = rd_kafka_ConsumerGroupDescription_partition_assignor(d); a != nullptr)
    out.assignor = a;
  out.simple = rd_kafka_ConsumerGroupDescription_is_simple_consumer_group(d) != 0;
  if (const rd_kafka_Node_t* n = rd_kafka_ConsumerGroupDescription_coordinator(d); n != nullptr) {
    const char* host = rd_kafka_Node_host(n);
    out.coordinator = {rd_kafka_Node_id(n), host != nullptr ? host : "", rd_kafka_Node_port(n)};
  }
  const size_t members = rd_kafka_ConsumerGroupDescription_member_count(d);
  for (size_t i = 0; i < members; ++i) {
    const rd_kafka_MemberDescription_t* m = rd_kafka_ConsumerGroupDescription_member(d, i);
    auto text = [](const char* s) { return std::string(s != nullptr ? s : ""); };
    GroupMember member;
    member.member_id = text(rd_kafka_MemberDescription_consumer_id(m));
    member.group_instance_id = text(rd_kafka_MemberDescription_group_instance_id(m));
    member.client_id = text(rd_kafka_MemberDescription_client_id(m));
    member.host = text(rd_kafka_MemberDescription_host(m));
    if (const rd_kafka_MemberAssignment_t* a = rd_kafka_MemberDescription_assignment(m);
        a != nullptr) {
      ASSIGN_OR_RETURN(member.assignment,
                       PartitionsOf(rd_kafka_MemberAssignment_partitions(a), what));
    }
    out.members.push_back(std::move(member));
  }
  std::sort(out.members.begin(), out.members.end(),
            [](const GroupMember& a, const GroupMember& b) { return a.member_id < b.member_id; });
  return out;
}

Result<std::vector<TopicPartition>> Admin::GroupOffsets(std::string_view group,
                                                        std::chrono::milliseconds timeout) {
  const std::string what = fmt::format("offsets of group '{}'", group);
  const std::string id(group);
  std::unique_ptr<rd_kafka_ListConsumerGroupOffsets_t,
                  decltype(&rd_kafka_ListConsumerGroupOffsets_destroy)>
      ask(rd_kafka_ListConsumerGroupOffsets_new(id.c_str(), nullptr),
          &rd_kafka_ListConsumerGroupOffsets_destroy);
  ASSIGN_OR_RETURN(
      AdminOptionsPtr options,
      MakeOptions(rk_.get(), RD_KAFKA_ADMIN_OP_LISTCONSUMERGROUPOFFSETS, timeout, what));
  QueuePtr queue(rd_kafka_queue_new(rk_.get()));
  rd_kafka_ListConsumerGroupOffsets_t* asks[] = {ask.get()};
  rd_kafka_ListConsumerGroupOffsets(rk_.get(), asks, 1, options.get(), queue.get());
  ASSIGN_OR_RETURN(EventPtr ev, WaitResult(queue.get(), timeout, what));
  const rd_kafka_ListConsumerGroupOffsets_result_t* result =
      rd_kafka_event_ListConsumerGroupOffsets_result(ev.get());
  if (result == nullptr)
    return InternalError("{}: unexpected event {}", what, rd_kafka_event_name(ev.get()));
  size_t count = 0;
  const rd_kafka_group_result_t** groups =
      rd_kafka_ListConsumerGroupOffsets_result_groups(result, &count);
  ASSIGN_OR_RETURN(const rd_kafka_group_result_t* g, OneGroup(groups, count, what));
  return PartitionsOf(rd_kafka_group_result_partitions(g), what);
}

Status Admin::AlterGroupOffsets(std::string_view group, const std::vector<TopicPartition>& offsets,
                                std::chrono::milliseconds timeout) {
  const std::string what = fmt::format("change offsets of group '{}'", group);
  if (offsets.empty()) return InvalidArgumentError("{}: no partitions", what);
  for (const TopicPartition& tp : offsets) {
    if (tp.offset < 0)
      return InvalidArgumentError("{}: {} [{}]: offset {} is not an offset", what, tp.topic,
                                  tp.partition, tp.offset);
  }
  const std::string id(group);
  detail::PartitionListPtr list = detail::OffsetList(offsets);
  std::unique_ptr<rd_kafka_AlterConsumerGroupOffsets_t,
                  decltype(&rd_kafka_AlterConsumerGroupOffsets_destroy)>
      alter(rd_kafka_AlterConsumerGroupOffsets_new(id.c_str(), list.get()),
            &rd_kafka_AlterConsumerGroupOffsets_destroy);
  ASSIGN_OR_RETURN(
      AdminOptionsPtr options,
      MakeOptions(rk_.get(), RD_KAFKA_ADMIN_OP_ALTERCONSUMERGROUPOFFSETS, timeout, what));
  QueuePtr queue(rd_kafka_queue_new(rk_.get()));
  rd_kafka_AlterConsumerGroupOffsets_t* alters[] = {alter.get()};
  rd_kafka_AlterConsumerGroupOffsets(rk_.get(), alters, 1, options.get(), queue.get());
  ASSIGN_OR_RETURN(EventPtr ev, WaitResult(queue.get(), timeout, what));
  const rd_kafka_AlterConsumerGroupOffsets_result_t* result =
      rd_kafka_event_AlterConsumerGroupOffsets_result(ev.get());
  if (result == nullptr)
    return InternalError("{}: unexpected event {}", what, rd_kafka_event_name(ev.get()));
  size_t count = 0;
  const rd_kafka_group_result_t** groups =
      rd_kafka_AlterConsumerGroupOffsets_result_groups(result, &count);
  ASSIGN_OR_RETURN(const rd_kafka_group_result_t* g, OneGroup(groups, count, what));
  return PartitionsOf(rd_kafka_group_result_partitions(g), what).status();
}

Status Admin::DeleteGroup(std::string_view group, std::chrono::milliseconds timeout) {
  const std::string what = fmt::format("delete group '{}'", group);
  const std::string id(group);
  std::unique_ptr<rd_kafka_DeleteGroup_t, decltype(&rd_kafka_DeleteGroup_destroy)> del(
      rd_kafka_DeleteGroup_new(id.c_str()), &rd_kafka_DeleteGroup_destroy);
  ASSIGN_OR_RETURN(AdminOptionsPtr options,
                   MakeOptions(rk_.get(), RD_KAFKA_ADMIN_OP_DELETEGROUPS, timeout, what));
  QueuePtr queue(rd_kafka_queue_new(rk_.get()));
  rd_kafka_DeleteGroup_t* dels[] = {del.get()};
  rd_kafka_DeleteGroups(rk_.get(), dels, 1, options.get(), queue.get());
  ASSIGN_OR_RETURN(EventPtr ev, WaitResult(queue.get(), timeout, what));
  const rd_kafka_DeleteGroups_result_t* result = rd_kafka_event_DeleteGroups_result(ev.get());
  if (result == nullptr)
    return InternalError("{}: unexpected event {}", what, rd_kafka_event_name(ev.get()));
  size_t count = 0;
  const rd_kafka_group_result_t** groups = rd_kafka_DeleteGroups_result_groups(result, &count);
  return OneGroup(groups, count, what).status();
}

}  // namespace sluice::kafka::client
