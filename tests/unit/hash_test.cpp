#include "support/hash.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace ferrite {
namespace {

std::string pattern(size_t n) {
  std::string s(n, '\0');
  for (size_t i = 0; i < n; ++i) s[i] = static_cast<char>((i * 7 + 3) & 255);
  return s;
}

// FIPS 180-2 appendix B / NIST CAVS examples.
TEST(Sha256, StandardVectors) {
  EXPECT_EQ(sha256("").hex(), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(sha256("abc").hex(),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(sha256("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq").hex(),
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  EXPECT_EQ(sha256("abcdefghbcdefghicdefghijdefghijkefghijklfghijklmghijklmnhijklmnoijklmnopjklmn"
                   "opqklmnopqrlmnopqrsmnopqrstnopqrstu")
                .hex(),
            "cf5b16a778af8380036ce59e7b0492370b249b11e8f07a51afac45037afee9d1");
  EXPECT_EQ(sha256(std::string(1000000, 'a')).hex(),
            "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

// Lengths around the padding boundaries (55/56 bytes: length fits in the last block or not; 64:
// exactly one block). Expected values from coreutils/Python hashlib.
TEST(Sha256, PaddingBoundaries) {
  const std::vector<std::pair<size_t, const char*>> cases = {
      {55, "e7313d333c272e639f790978283f9eb392e843d0f29b7016828bb1daa4aac70b"},
      {56, "4324d65f3c103567f5589c710bc08f8523f929a9272e3af36fc968e52abc6c27"},
      {63, "81c80242132f230c3bd41b3e63bbcff16107339549214a99614ff26664625055"},
      {64, "39e3d7b6b5d075d37d053ad89b24b41bef4f3c29760c84447cab3f3be1882241"},
      {65, "aacca6ff74fdbb296d165a45cecfa04e5127bc008770fbbdd48006f2d2fae95e"},
      {119, "9ce7368e4daf32341631b492e80359dc9f594b48453cd0dd5bf0b19279cc177e"},
      {120, "7836b787757e95e58b3ca5aec90b1b004e8deba1e50e9675af9cabf1a13a04b5"},
      {127, "a8d23e75d936f303d248888d9b165ee543f4cbafcad3c9dd2a79bd84faa11d07"},
      {128, "d2742f1f4ac6bb7ca2b239ee18402ba8b3f9f8e652d2a72973c2b9ba11c08cf6"},
      {1000, "1e9bc38cbf860b9ec31918b065f9b52476c549a782e0e7990bed8ce3868d2371"},
  };
  for (auto [n, hex] : cases) EXPECT_EQ(sha256(pattern(n)).hex(), hex) << n << " bytes";
}

TEST(Sha256, IncrementalMatchesOneShot) {
  std::string msg = pattern(300);
  std::string expected = sha256(msg).hex();
  for (size_t split = 0; split <= msg.size(); ++split) {
    Sha256 h;
    h.update(std::string_view(msg).substr(0, split));
    h.update(std::string_view(msg).substr(split));
    ASSERT_EQ(h.finish().hex(), expected) << "split at " << split;
  }
  // Byte-at-a-time and odd chunk sizes.
  for (size_t chunk : {1, 3, 17, 63, 65}) {
    Sha256 h;
    for (size_t i = 0; i < msg.size(); i += chunk) h.update(std::string_view(msg).substr(i, chunk));
    EXPECT_EQ(h.finish().hex(), expected) << "chunk " << chunk;
  }
}

TEST(Sha256, FinishResets) {
  Sha256 h;
  h.update("garbage");
  h.finish();
  EXPECT_EQ(h.update("abc").finish(), sha256("abc"));
}

TEST(Sha256, UpdateU64IsLittleEndian) {
  std::string le("\x01\x02\x03\x04\x05\x06\x07\x08", 8);
  EXPECT_EQ(Sha256().update_u64(0x0807060504030201ULL).finish(), sha256(le));
}

TEST(Digest256, HexRoundTrip) {
  Digest256 d = sha256("abc"), parsed;
  ASSERT_TRUE(Digest256::from_hex(d.hex(), &parsed));
  EXPECT_EQ(parsed, d);
  std::string upper = d.hex();
  for (char& c : upper) c = static_cast<char>(std::toupper(c));
  ASSERT_TRUE(Digest256::from_hex(upper, &parsed));
  EXPECT_EQ(parsed, d);
  EXPECT_FALSE(Digest256::from_hex(d.hex().substr(1), &parsed));
  EXPECT_FALSE(Digest256::from_hex(std::string(63, '0') + "g", &parsed));
  EXPECT_EQ(to_hex(reinterpret_cast<const uint8_t*>("\x00\xff\x10"), 3), "00ff10");
}

}  // namespace
}  // namespace ferrite
