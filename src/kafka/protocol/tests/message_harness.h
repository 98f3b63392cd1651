// What the message-family tests (groups_test.cc, txn_test.cc) share: a Spec per message
// (a sample and its golden bytes per version), the round trip of every version, and the
// malformed-input checks every golden is put through (every strict prefix, trailing
// bytes, corrupted bytes). Each test file instantiates its own parameterized suite.
#pragma once

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <functional>
#include <optional>
#include <ostream>
#include <span>
#include <string>
#include <vector>

#include "kafka/protocol/api.h"
#include "kafka/protocol/tests/golden.h"
#include "kafka/protocol/wire.h"

namespace sluice::kafka::testing {

using Bytes = std::vector<uint8_t>;

// The value of a nullable field: null in the "nulls" run of a test, `s` otherwise.
inline std::optional<std::string> Opt(bool null, const std::string& s) {
  if (null) return std::nullopt;
  return s;
}

inline void NStr(Golden& g, bool f, const std::optional<std::string>& s) {
  if (s) {
    g.s(f, *s);
  } else {
    g.ns(f);
  }
}

// Each message has a Sample(version, nulls) with every field of that version set to a
// non-default value (nullable ones null when `nulls`), and a Golden(version, nulls) with
// the bytes Kafka's definition gives for it, written out field by field.
template <typename M>
struct Spec {
  const char* name;
  ApiKey key;
  M (*sample)(int16_t, bool);
  Bytes (*golden)(int16_t, bool);
  // The versions to check: the advertised range (FindApi) when max < 0, else 0..max (the
  // JSON's validVersions, for messages whose codec reaches past what is advertised).
  int16_t max = -1;

  int16_t first() const { return max < 0 ? FindApi(key)->min : 0; }
  int16_t last() const { return max < 0 ? FindApi(key)->max : max; }
};

template <typename M>
void CheckEveryVersion(const Spec<M>& spec) {
  for (int16_t v = spec.first(); v <= spec.last(); ++v) {
    for (bool nulls : {false, true}) {
      SCOPED_TRACE(fmt::format("{} v{}{}", spec.name, v, nulls ? " with nulls" : ""));
      const M msg = spec.sample(v, nulls);
      const Bytes want = spec.golden(v, nulls);
      Bytes got;
      Writer w(&got);
      msg.Encode(w, v);
      EXPECT_EQ(got, want);
      Reader r(want);
      M decoded;
      Status st = decoded.Decode(r, v);
      ASSERT_TRUE(st.ok()) << st.ToString();
      EXPECT_TRUE(decoded == msg);
      EXPECT_EQ(r.remaining(), 0u);
    }
  }
}

// One golden and a decoder of its message and version, for the malformed-input checks.
struct Case {
  std::string name;
  Bytes bytes;
  std::function<Status(std::span<const uint8_t>)> decode;
};

inline void PrintTo(const Case& c, std::ostream* os) { *os << c.name; }

template <typename M>
void AddCases(std::vector<Case>* out, const Spec<M>& spec) {
  for (int16_t v = spec.first(); v <= spec.last(); ++v) {
    for (bool nulls : {false, true}) {
      out->push_back({fmt::format("{}_v{}{}", spec.name, v, nulls ? "_nulls" : ""),
                      spec.golden(v, nulls), [v](std::span<const uint8_t> b) {
                        Reader r(b);
                        M m;
                        return m.Decode(r, v);
                      }});
    }
  }
}

// Truncation at every byte, so at every field of the version.
inline void ExpectEveryStrictPrefixFails(const Case& c) {
  for (size_t n = 0; n < c.bytes.size(); ++n) {
    Status st = c.decode(std::span<const uint8_t>(c.bytes.data(), n));
    EXPECT_FALSE(st.ok()) << "prefix of " << n << " of " << c.bytes.size() << " bytes decoded";
    EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  }
}

inline void ExpectTrailingBytesTolerated(const Case& c) {
  Bytes bytes = c.bytes;
  bytes.push_back(0xab);
  bytes.push_back(0xcd);
  EXPECT_TRUE(c.decode(bytes).ok());
}

// Each byte replaced by values that make lengths negative, huge, null or varints long:
// decoding must return (either way) without crashing or over-reading.
inline void DecodeEveryCorruption(const Case& c) {
  for (size_t i = 0; i < c.bytes.size(); ++i) {
    for (uint8_t b : {0x00, 0x7f, 0x80, 0xff}) {
      Bytes mutated = c.bytes;
      mutated[i] = b;
      (void)c.decode(mutated);
    }
  }
}

template <typename M>
Bytes EncodeAt(const M& m, int16_t v) {
  Bytes out;
  Writer w(&out);
  m.Encode(w, v);
  return out;
}

template <typename M>
Status DecodeAt(const Bytes& bytes, int16_t v, M* m) {
  Reader r(bytes);
  return m->Decode(r, v);
}

}  // namespace sluice::kafka::testing
