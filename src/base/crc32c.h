// CRC32C (Castagnoli), the checksum of Kafka record batches (format v2).
// Uses the SSE4.2 crc32 instruction when the CPU has it, a table-driven fallback otherwise.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

namespace sluice::crc32c {

// Extends `crc` (the value returned for the bytes before `data`) over `data`.
// Value(data) == Extend(0, data).
uint32_t Extend(uint32_t crc, const uint8_t* data, size_t n);

inline uint32_t Value(const uint8_t* data, size_t n) { return Extend(0, data, n); }
inline uint32_t Value(std::span<const uint8_t> data) { return Extend(0, data.data(), data.size()); }

// The portable implementation, always available (tests compare the two).
uint32_t ExtendPortable(uint32_t crc, const uint8_t* data, size_t n);

// True when Extend uses the hardware instruction.
bool HardwareAccelerated();

}  // namespace sluice::crc32c
