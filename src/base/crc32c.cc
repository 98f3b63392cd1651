#include "base/crc32c.h"

#include <array>
#include <cstring>

#if defined(__x86_64__)
#include <nmmintrin.h>
#endif

namespace sluice::crc32c {
namespace {

constexpr uint32_t kPoly = 0x82F63B78;  // reflected Castagnoli polynomial

// Slicing-by-8 tables: table[k][b] is the CRC of byte b followed by k zero bytes.
struct Tables {
  std::array<std::array<uint32_t, 256>, 8> t{};
  constexpr Tables() {
    for (uint32_t b = 0; b < 256; ++b) {
      uint32_t c = b;
      for (int i = 0; i < 8; ++i) c = (c >> 1) ^ ((c & 1) ? kPoly : 0);
      t[0][b] = c;
    }
    for (uint32_t b = 0; b < 256; ++b) {
      for (int k = 1; k < 8; ++k) t[k][b] = (t[k - 1][b] >> 8) ^ t[0][t[k - 1][b] & 0xff];
    }
  }
};
constexpr Tables kTables;

// GF(2) arithmetic modulo the polynomial, in the reflected bit order of the CRC (as in
// zlib's crc32_combine): lets CRCs of adjacent pieces computed in parallel be joined.
constexpr uint32_t MultModP(uint32_t a, uint32_t b) {
  uint32_t m = 1u << 31, p = 0;
  for (;;) {
    if (a & m) {
      p ^= b;
      if ((a & (m - 1)) == 0) break;
    }
    m >>= 1;
    b = (b & 1) ? (b >> 1) ^ kPoly : b >> 1;
  }
  return p;
}

// x^(8n) mod P: multiplying a CRC by it appends n zero bytes.
constexpr uint32_t ZerosOperator(uint64_t n) {
  uint32_t x2k = 1u << 30;  // x^1
  uint32_t p = 1u << 31;    // x^0
  uint64_t bits = n * 8;
  while (bits != 0) {
    if (bits & 1) p = MultModP(x2k, p);
    x2k = MultModP(x2k, x2k);
    bits >>= 1;
  }
  return p;
}

#if defined(__x86_64__)
constexpr size_t kStripe = 4096;  // bytes per stream in the three-way loop
constexpr uint32_t kShiftStripe = ZerosOperator(kStripe);

__attribute__((target("sse4.2"))) uint64_t Crc8(uint64_t c, const uint8_t* p) {
  uint64_t v;
  std::memcpy(&v, p, 8);
  return _mm_crc32_u64(c, v);
}

__attribute__((target("sse4.2"))) uint32_t ExtendSse42(uint32_t crc, const uint8_t* p, size_t n) {
  uint64_t c = ~crc;
  // Three independent streams over adjacent 4 KiB stripes hide the instruction's 3-cycle
  // latency; the stripe CRCs are then joined by multiplying by x^(8*4096).
  while (n >= 3 * kStripe) {
    uint64_t c1 = 0, c2 = 0;  // raw register state, no pre/post inversion
    const uint8_t* a = p;
    const uint8_t* b = p + kStripe;
    const uint8_t* d = p + 2 * kStripe;
    for (size_t i = 0; i < kStripe; i += 8) {
      c = Crc8(c, a + i);
      c1 = Crc8(c1, b + i);
      c2 = Crc8(c2, d + i);
    }
    // raw(c, A||B) = raw(c, A) * x^(8|B|) xor raw(0, B)
    c = MultModP(kShiftStripe, static_cast<uint32_t>(c)) ^ static_cast<uint32_t>(c1);
    c = MultModP(kShiftStripe, static_cast<uint32_t>(c)) ^ static_cast<uint32_t>(c2);
    p += 3 * kStripe;
    n -= 3 * kStripe;
  }
  while (n >= 8) {
    c = Crc8(c, p);
    p += 8;
    n -= 8;
  }
  while (n > 0) {
    c = _mm_crc32_u8(static_cast<uint32_t>(c), *p++);
    --n;
  }
  return ~static_cast<uint32_t>(c);
}
#endif

using ExtendFn = uint32_t (*)(uint32_t, const uint8_t*, size_t);

ExtendFn Choose() {
#if defined(__x86_64__)
  if (__builtin_cpu_supports("sse4.2")) return &ExtendSse42;
#endif
  return &ExtendPortable;
}

const ExtendFn kExtend = Choose();

}  // namespace

uint32_t ExtendPortable(uint32_t crc, const uint8_t* p, size_t n) {
  const auto& t = kTables.t;
  uint32_t c = ~crc;
  while (n >= 8) {
    uint32_t lo =
        c ^ (uint32_t{p[0]} | uint32_t{p[1]} << 8 | uint32_t{p[2]} << 16 | uint32_t{p[3]} << 24);
    c = t[7][lo & 0xff] ^ t[6][(lo >> 8) & 0xff] ^ t[5][(lo >> 16) & 0xff] ^ t[4][lo >> 24] ^
        t[3][p[4]] ^ t[2][p[5]] ^ t[1][p[6]] ^ t[0][p[7]];
    p += 8;
    n -= 8;
  }
  while (n > 0) {
    c = (c >> 8) ^ t[0][(c ^ *p++) & 0xff];
    --n;
  }
  return ~c;
}

uint32_t Extend(uint32_t crc, const uint8_t* data, size_t n) { return kExtend(crc, data, n); }

bool HardwareAccelerated() { return kExtend != &ExtendPortable; }

}  // namespace sluice::crc32c
