// The "cooperative-sticky" assignor (assignors.h): Kafka's CooperativeStickyAssignor
// (KIP-54 stickiness, KIP-429 incremental rebalancing), written from its documented
// behaviour rather than from its algorithm.
//
// 1. Claims. A member claims the partitions its subscription lists as owned, from its
//    generation: the subscription's generation id (v2+), else the first four bytes of its
//    user data as an int32 (what the Java assignor puts there for v0/v1 subscriptions),
//    else -1. A partition's owner is its claimant of the highest generation; when two or
//    more share that generation nobody owns it (Kafka's "claimed by multiple consumers in
//    the same generation").
// 2. Keep. An owner keeps what it owns of the topics it still subscribes to.
// 3. Fill. Partitions nobody keeps go, topic by topic (topics with fewer subscribers
//    first, then by name) and partition by partition, to the least loaded subscriber.
// 4. Balance. While a partition can move from member A to a subscriber B of its topic
//    with count(B) + 1 < count(A) (Kafka's test of a balanced assignment), the most loaded
//    such A gives one to the least loaded such B, newly given partitions before kept
//    ones, and of those the last in (partition, topic) order, so that a member keeps its
//    lowest partitions as Kafka's does. Every move lowers the sum of squared counts, so
//    this ends; with identical subscriptions it ends with counts within one of each other
//    and as many partitions kept as that balance allows.
// 5. Cooperate. A partition given to someone other than its owner while some member
//    claims it is left out of this round: its claimants revoke it (it is not in their
//    assignment), rejoin, and the next round gives it out. So a partition only changes
//    hands once nobody else claims it.
//
// Kafka's rack awareness, and its move of a partition back to its previous owner of an
// older generation, are not done.
#include <algorithm>
#include <set>
#include <utility>
#include <vector>

#include "kafka/group/assignors.h"

namespace sluice::kafka::group {
namespace {

constexpr int32_t kNoGeneration = -1;
constexpr int kNobody = -1;

int32_t GenerationOf(const Subscription& s) {
  if (s.generation_id >= 0) return s.generation_id;
  // Kafka reads the user data as its CooperativeStickyAssignor schema (one int32); what
  // does not read as that is the default generation.
  if (!s.user_data || s.user_data->size() < 4) return kNoGeneration;
  const std::vector<uint8_t>& b = *s.user_data;
  return static_cast<int32_t>(uint32_t{b[0]} << 24 | uint32_t{b[1]} << 16 | uint32_t{b[2]} << 8 |
                              uint32_t{b[3]});
}

// One assignment's working state: built, run once by Build(), dropped, on the caller's
// thread. Members are indexed in member id order, topics in name order, partitions by
// `flat` = offset of its topic + partition number.
class StickyBuilder {
 public:
  StickyBuilder(std::vector<const Member*> members, const PartitionCounts& counts);
  GroupAssignment Build();

 private:
  struct Topic {
    std::string name;
    int32_t count = 0;
    int first = 0;                 // flat index of partition 0
    std::vector<int> subscribers;  // member indices, ascending
    // The least loaded subscriber (the first of equals), while no load has changed since.
    int least = kNobody;
    bool stale = true;
  };
  struct Holding {
    std::set<int> fresh;  // ranks of partitions given this round
    std::set<int> kept;   // ranks of partitions kept from the owner
  };

  int TopicIndex(const std::string& name) const;  // or kNobody
  int Least(int topic);
  void ResolveClaims();
  void Give(int flat, int member, bool kept);
  void Fill();
  void Balance();
  bool MoveOneFrom(int member);
  void Move(int rank, int from, int to);
  void SetLoad(int member, int load);

  std::vector<const Member*> members_;
  std::vector<std::vector<int>> member_topics_;  // topic indices, ascending
  std::vector<Topic> topics_;
  std::vector<int> topic_of_;  // flat -> topic index
  std::vector<int> rank_;      // flat -> rank in (partition, topic) order
  std::vector<int> flat_of_;   // rank -> flat
  std::vector<int> owner_;     // flat -> the claimant that owns it, or kNobody
  std::vector<bool> claimed_;  // flat -> some member lists it as owned
  std::vector<int> holder_;    // flat -> the member given it, or kNobody
  std::vector<Holding> held_;
  std::vector<int> load_;                // member -> partitions given
  std::set<std::pair<int, int>> loads_;  // (load, member) of every member
};

StickyBuilder::StickyBuilder(std::vector<const Member*> members, const PartitionCounts& counts)
    : members_(std::move(members)) {
  std::sort(members_.begin(), members_.end(),
            [](const Member* a, const Member* b) { return a->member_id < b->member_id; });
  std::set<std::string> subscribed;
  for (const Member* m : members_) {
    subscribed.insert(m->subscription.topics.begin(), m->subscription.topics.end());
  }
  int flats = 0;
  for (const std::string& name : subscribed) {
    auto it = counts.find(name);
    if (it == counts.end() || it->second <= 0) continue;
    topics_.push_back({name, it->second, flats, {}, {}});
    flats += it->second;
  }
  member_topics_.resize(members_.size());
  for (size_t m = 0; m < members_.size(); ++m) {
    const std::vector<std::string>& sub = members_[m]->subscription.topics;
    for (const std::string& name : std::set<std::string>(sub.begin(), sub.end())) {
      const int t = TopicIndex(name);
      if (t == kNobody) continue;
      member_topics_[m].push_back(t);  // ascending: names and topics_ are both in order
      topics_[t].subscribers.push_back(static_cast<int>(m));
    }
  }
  topic_of_.resize(flats);
  std::vector<std::pair<int32_t, int>> order;  // (partition, topic) of each flat
  order.reserve(flats);
  for (size_t t = 0; t < topics_.size(); ++t) {
    for (int32_t p = 0; p < topics_[t].count; ++p) {
      topic_of_[topics_[t].first + p] = static_cast<int>(t);
      order.push_back({p, static_cast<int>(t)});
    }
  }
  std::sort(order.begin(), order.end());
  rank_.resize(flats);
  flat_of_.resize(flats);
  for (int r = 0; r < flats; ++r) {
    const int flat = topics_[order[r].second].first + order[r].first;
    rank_[flat] = r;
    flat_of_[r] = flat;
  }
  owner_.assign(flats, kNobody);
  claimed_.assign(flats, false);
  holder_.assign(flats, kNobody);
  held_.resize(members_.size());
  load_.assign(members_.size(), 0);
  for (size_t m = 0; m < members_.size(); ++m) loads_.insert({0, static_cast<int>(m)});
}

int StickyBuilder::TopicIndex(const std::string& name) const {
  auto it = std::lower_bound(topics_.begin(), topics_.end(), name,
                             [](const Topic& t, const std::string& n) { return t.name < n; });
  if (it == topics_.end() || it->name != name) return kNobody;
  return static_cast<int>(it - topics_.begin());
}

void StickyBuilder::ResolveClaims() {
  std::vector<int32_t> best(owner_.size(), 0);  // the owner's generation
  std::vector<bool> tied(owner_.size(), false);
  for (size_t m = 0; m < members_.size(); ++m) {
    const int32_t generation = GenerationOf(members_[m]->subscription);
    for (const auto& [name, partitions] : members_[m]->subscription.owned_partitions) {
      const int t = TopicIndex(name);
      if (t == kNobody) continue;
      const Topic* topic = &topics_[t];
      for (int32_t p : partitions) {
        if (p < 0 || p >= topic->count) continue;
        const int flat = topic->first + p;
        if (owner_[flat] == static_cast<int>(m)) continue;  // listed twice
        if (!claimed_[flat] || generation > best[flat]) {
          owner_[flat] = static_cast<int>(m);
          best[flat] = generation;
          tied[flat] = false;
        } else if (generation == best[flat]) {
          tied[flat] = true;
        }
        claimed_[flat] = true;
      }
    }
  }
  for (size_t flat = 0; flat < owner_.size(); ++flat) {
    if (tied[flat]) owner_[flat] = kNobody;
  }
}

// A scan, cached until a subscriber's load changes: keeping each topic's subscribers
// sorted by load instead costs a tree update per topic of a member at every change.
int StickyBuilder::Least(int topic) {
  Topic& t = topics_[topic];
  if (t.stale) {
    t.least = t.subscribers.front();
    for (int m : t.subscribers) {
      if (load_[m] < load_[t.least]) t.least = m;
    }
    t.stale = false;
  }
  return t.least;
}

void StickyBuilder::SetLoad(int member, int load) {
  for (int t : member_topics_[member]) topics_[t].stale = true;
  loads_.erase({load_[member], member});
  loads_.insert({load, member});
  load_[member] = load;
}

void StickyBuilder::Give(int flat, int member, bool kept) {
  holder_[flat] = member;
  (kept ? held_[member].kept : held_[member].fresh).insert(rank_[flat]);
  SetLoad(member, load_[member] + 1);
}

void StickyBuilder::Move(int rank, int from, int to) {
  const int flat = flat_of_[rank];
  if (held_[from].fresh.erase(rank) == 0) held_[from].kept.erase(rank);
  SetLoad(from, load_[from] - 1);
  Give(flat, to, owner_[flat] == to);
}

void StickyBuilder::Fill() {
  std::vector<int> order(topics_.size());
  for (size_t t = 0; t < order.size(); ++t) order[t] = static_cast<int>(t);
  std::stable_sort(order.begin(), order.end(), [this](int a, int b) {
    return topics_[a].subscribers.size() < topics_[b].subscribers.size();
  });
  for (int t : order) {
    for (int32_t p = 0; p < topics_[t].count; ++p) {
      const int flat = topics_[t].first + p;
      if (holder_[flat] == kNobody) Give(flat, Least(t), false);
    }
  }
}

// Moves one partition from `member` to a subscriber of its topic loaded two less or more.
bool StickyBuilder::MoveOneFrom(int member) {
  for (const std::set<int>* ranks : {&held_[member].fresh, &held_[member].kept}) {
    for (auto it = ranks->rbegin(); it != ranks->rend(); ++it) {
      const int to = Least(topic_of_[flat_of_[*it]]);
      if (load_[to] + 1 < load_[member]) {
        Move(*it, member, to);
        return true;
      }
    }
  }
  return false;
}

void StickyBuilder::Balance() {
  bool moved = true;
  while (moved && !loads_.empty()) {
    moved = false;
    const int least = loads_.begin()->first;
    for (auto it = loads_.rbegin(); it != loads_.rend() && it->first > least + 1; ++it) {
      if (MoveOneFrom(it->second)) {
        moved = true;  // `it` is stale now: start again from the most loaded
        break;
      }
    }
  }
}

GroupAssignment StickyBuilder::Build() {
  ResolveClaims();
  for (size_t flat = 0; flat < owner_.size(); ++flat) {
    const int owner = owner_[flat];
    if (owner == kNobody) continue;
    const std::vector<int>& subscribed = member_topics_[owner];
    if (std::binary_search(subscribed.begin(), subscribed.end(), topic_of_[flat])) {
      Give(static_cast<int>(flat), owner, true);
    }
  }
  Fill();
  Balance();
  GroupAssignment out;
  for (const Member* m : members_) out[m->member_id];
  for (size_t flat = 0; flat < holder_.size(); ++flat) {
    const int holder = holder_[flat];
    SLUICE_ASSERT(holder != kNobody);  // Fill gives every partition of a subscribed topic
    // Another member may still read it: it waits for the next round (step 5).
    if (holder != owner_[flat] && claimed_[flat]) continue;
    const Topic& topic = topics_[topic_of_[flat]];
    out[members_[holder]->member_id].assigned_partitions[topic.name].push_back(
        static_cast<int32_t>(flat) - topic.first);
  }
  return out;
}

}  // namespace

Result<GroupAssignment> AssignCooperativeSticky(std::span<const Member> members,
                                                const PartitionCounts& partitions) {
  std::vector<const Member*> list;
  std::set<std::string_view> ids;
  for (const Member& m : members) {
    if (!ids.insert(m.member_id).second) {
      return InvalidArgumentError("member {} is listed twice", m.member_id);
    }
    list.push_back(&m);
  }
  return StickyBuilder(std::move(list), partitions).Build();
}

std::vector<uint8_t> CooperativeStickyUserData(int32_t generation) {
  const auto g = static_cast<uint32_t>(generation);
  return {static_cast<uint8_t>(g >> 24), static_cast<uint8_t>(g >> 16),
          static_cast<uint8_t>(g >> 8), static_cast<uint8_t>(g)};
}

}  // namespace sluice::kafka::group
