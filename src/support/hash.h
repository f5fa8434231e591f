// Content hashing for cache keys and integrity checks: SHA-256 (FIPS 180-4), written from the
// specification. A cryptographic hash is used rather than a fast non-cryptographic one because the
// cache trusts a key match to mean "same compiled artifact": accidental collisions must be out of
// the question, and the cost (a few hundred MB/s) is small next to compiling.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>

namespace ferrite {

struct Digest256 {
  std::array<uint8_t, 32> bytes{};

  std::string hex() const;
  // Parses 64 hex digits (either case); false on anything else.
  static bool from_hex(std::string_view hex, Digest256* out);
  bool operator==(const Digest256&) const = default;
};

// Incremental SHA-256. update() may be called any number of times; finish() pads and returns the
// digest, after which the object is reset and can hash a new message.
class Sha256 {
 public:
  Sha256() { reset(); }
  void reset();
  Sha256& update(const void* data, size_t size);
  Sha256& update(std::string_view s) { return update(s.data(), s.size()); }
  Sha256& update(std::span<const uint8_t> s) { return update(s.data(), s.size()); }
  // Little-endian fixed-width integer, for framing (length prefixes, tags).
  Sha256& update_u64(uint64_t v);
  Digest256 finish();

 private:
  void compress(const uint8_t* block);

  std::array<uint32_t, 8> state_{};
  std::array<uint8_t, 64> buffer_{};
  size_t buffered_ = 0;
  uint64_t total_bytes_ = 0;
};

Digest256 sha256(std::string_view data);
Digest256 sha256(const void* data, size_t size);

// Lower-case hex of arbitrary bytes.
std::string to_hex(const uint8_t* data, size_t size);

}  // namespace ferrite
