#include "runtime/compile_cache.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "compile_cache_test_util.h"

namespace ferrite {
namespace {

using namespace cache_testing;
namespace fs = std::filesystem;

TEST(CacheKey, FieldsAreFramedUnambiguously) {
  EXPECT_NE(CacheKey().add("a", "bc").hex(), CacheKey().add("ab", "c").hex());
  EXPECT_NE(CacheKey().add("x", "ab").add("y", "").hex(),
            CacheKey().add("x", "a").add("y", "b").hex());
  EXPECT_NE(CacheKey().add("x", "").hex(), CacheKey().hex());
  EXPECT_NE(CacheKey().add("a", "1").add("b", "2").hex(),
            CacheKey().add("b", "2").add("a", "1").hex());
  // An integer field never equals a byte field holding the same 8 bytes.
  std::string le("\x07\0\0\0\0\0\0\0", 8);
  EXPECT_NE(CacheKey().add_int("n", 7).hex(), CacheKey().add("n", le).hex());
  EXPECT_NE(CacheKey().add_int("n", 7).hex(), CacheKey().add_int("n", 8).hex());
  // Embedded NULs count.
  EXPECT_NE(CacheKey().add("x", std::string("a\0b", 3)).hex(), CacheKey().add("x", "a").hex());
  std::vector<uint8_t> bytes = {'h', 'i'};
  EXPECT_EQ(CacheKey().add("x", std::span<const uint8_t>(bytes)).hex(),
            CacheKey().add("x", "hi").hex());
}

TEST(CacheKey, HexIsStableAndDoesNotEndTheKey) {
  CacheKey k;
  k.add("graph", "g");
  std::string h1 = k.hex();
  EXPECT_EQ(h1.size(), 64u);
  EXPECT_EQ(h1.find_first_not_of("0123456789abcdef"), std::string::npos);
  EXPECT_EQ(k.hex(), h1);
  k.add("more", "x");
  EXPECT_NE(k.hex(), h1);
  EXPECT_EQ(k.hex(), CacheKey().add("graph", "g").add("more", "x").hex());
}

TEST(CacheKey, CompileKeyCoversEveryPart) {
  CompileKeyParts base{"graph-bytes", "opt=1", "cpu avx2", "gcc 12", "so"};
  std::string k0 = make_compile_key(base).hex();
  EXPECT_EQ(make_compile_key(base).hex(), k0);
  auto changed = [&](auto mutate) {
    CompileKeyParts p = base;
    mutate(p);
    return make_compile_key(p).hex();
  };
  EXPECT_NE(changed([](auto& p) { p.graph = "graph-bytez"; }), k0);
  EXPECT_NE(changed([](auto& p) { p.options = "opt=2"; }), k0);
  EXPECT_NE(changed([](auto& p) { p.device = "cpu avx512"; }), k0);
  EXPECT_NE(changed([](auto& p) { p.compiler_version = "gcc 13"; }), k0);
  EXPECT_NE(changed([](auto& p) { p.artifact_kind = "tuning"; }), k0);
  EXPECT_NE(changed([](auto& p) { p.include_build_stamp = false; }), k0);
  // Moving bytes between adjacent parts must change the key.
  EXPECT_NE(changed([](auto& p) {
              p.graph = "graph-bytesopt";
              p.options = "=1";
            }),
            k0);
  EXPECT_FALSE(ferrite_version().empty());
  EXPECT_EQ(ferrite_build_stamp().size(), 16u);
  EXPECT_EQ(ferrite_build_stamp(), ferrite_build_stamp());
}

TEST(CacheLocation, EnvironmentPrecedence) {
  auto loc = resolve_cache_location(fake_env(
      {{"FERRITE_CACHE_DIR", "/x/ferrite-dir"}, {"XDG_CACHE_HOME", "/xdg"}, {"HOME", "/home/u"}}));
  EXPECT_TRUE(loc.enabled);
  EXPECT_EQ(loc.dir, fs::path("/x/ferrite-dir"));
  loc = resolve_cache_location(fake_env({{"XDG_CACHE_HOME", "/xdg"}, {"HOME", "/home/u"}}));
  EXPECT_EQ(loc.dir, fs::path("/xdg/ferrite"));
  // The XDG spec ignores relative values.
  loc = resolve_cache_location(fake_env({{"XDG_CACHE_HOME", "rel"}, {"HOME", "/home/u"}}));
  EXPECT_EQ(loc.dir, fs::path("/home/u/.cache/ferrite"));
  loc = resolve_cache_location(fake_env({{"FERRITE_CACHE_DIR", ""}, {"HOME", "/home/u"}}));
  EXPECT_EQ(loc.dir, fs::path("/home/u/.cache/ferrite"));
  loc = resolve_cache_location(fake_env({}));
  EXPECT_TRUE(loc.dir.empty());
  EXPECT_FALSE(loc.note.empty());
  // A relative FERRITE_CACHE_DIR is made absolute so a later chdir does not move the cache.
  loc = resolve_cache_location(fake_env({{"FERRITE_CACHE_DIR", "rel/cache"}}));
  EXPECT_TRUE(loc.dir.is_absolute());
  for (const char* off : {"0", "off", "FALSE", "no"}) {
    loc = resolve_cache_location(fake_env({{"FERRITE_CACHE", off}, {"HOME", "/home/u"}}));
    EXPECT_FALSE(loc.enabled) << off;
  }
  loc = resolve_cache_location(fake_env({{"FERRITE_CACHE", "1"}, {"HOME", "/home/u"}}));
  EXPECT_TRUE(loc.enabled);
}

TEST(CompileCache, MissThenHitFromMemoryThenDisk) {
  TempDir tmp;
  CompileCache cache(options_for(tmp.path()));
  ASSERT_TRUE(cache.enabled());
  ASSERT_TRUE(cache.disk_enabled()) << cache.disabled_reason();
  auto k = key_of("model-a");
  auto r = cache.get(k);
  EXPECT_FALSE(r.hit());
  EXPECT_EQ(r.outcome, CacheOutcome::kAbsent);
  EXPECT_TRUE(r.reason.empty());

  std::string payload("compiled\0bytes", 14);
  ASSERT_TRUE(cache.put(k, payload, "built by test").is_ok());
  r = cache.get(k);
  ASSERT_TRUE(r.hit());
  EXPECT_EQ(r.value->payload, payload);
  EXPECT_EQ(r.value->metadata, "built by test");
  EXPECT_FALSE(cache.get(key_of("model-b")).hit());

  fs::path entry = cache.entry_path(k);
  EXPECT_EQ(entry.parent_path().filename().string(), k.hex().substr(0, 2));
  EXPECT_EQ(entry.filename().string(), k.hex() + ".entry");
  EXPECT_TRUE(fs::exists(entry));
  EXPECT_EQ(tree(tmp.path()), std::vector<std::string>{fs::relative(entry, tmp.path()).string()});

  // A second cache object (another process, in effect) hits on disk.
  CompileCache other(options_for(tmp.path()));
  auto d = other.get(k);
  ASSERT_TRUE(d.hit()) << d.reason;
  EXPECT_EQ(d.value->payload, payload);
  EXPECT_EQ(d.value->metadata, "built by test");
  // ... and then from its own memory.
  ASSERT_TRUE(other.get(k).hit());

  CacheStats s = cache.stats();
  EXPECT_EQ(s.hits, 1u);
  EXPECT_EQ(s.memory_hits, 1u);
  EXPECT_EQ(s.misses, 2u);
  EXPECT_EQ(s.writes, 1u);
  EXPECT_EQ(s.disk_entries, 1u);
  EXPECT_EQ(s.disk_bytes, fs::file_size(entry));
  CacheStats o = other.stats(false);
  EXPECT_EQ(o.disk_hits, 1u);
  EXPECT_EQ(o.memory_hits, 1u);
  EXPECT_EQ(o.memory_entries, 1u);
}

TEST(CompileCache, OverwriteAndEmptyPayloadAndRemove) {
  TempDir tmp;
  CompileCache cache(options_for(tmp.path()));
  auto k = key_of("k");
  ASSERT_TRUE(cache.put(k, "first").is_ok());
  ASSERT_TRUE(cache.put(k, "").is_ok());
  CompileCache fresh(options_for(tmp.path()));
  auto r = fresh.get(k);
  ASSERT_TRUE(r.hit()) << r.reason;
  EXPECT_EQ(r.value->payload, "");
  EXPECT_EQ(r.value->metadata, "");
  ASSERT_TRUE(cache.remove(k).is_ok());
  EXPECT_FALSE(cache.get(k).hit());
  EXPECT_FALSE(fs::exists(cache.entry_path(k)));
  EXPECT_FALSE(cache.put(k, "x", std::string(CompileCache::kMaxMetadataBytes + 1, 'm')).is_ok());
}

// Each corruption is detected by a cache without the entry in memory, reported as a rejected miss
// with a reason, the bad file is removed, and a rebuilt entry then works.
struct Corruption {
  const char* name;
  std::function<void(const fs::path& entry, CompileCache& cache)> apply;
  const char* reason_fragment;
};

TEST(CompileCache, CorruptEntriesAreRejectedRemovedAndRebuilt) {
  const std::string payload(5000, 'p');
  std::vector<Corruption> cases = {
      {"truncated payload",
       [](const fs::path& e, CompileCache&) { fs::resize_file(e, fs::file_size(e) - 100); },
       "size mismatch"},
      {"truncated header", [](const fs::path& e, CompileCache&) { fs::resize_file(e, 20); },
       "truncated header"},
      {"empty file", [](const fs::path& e, CompileCache&) { fs::resize_file(e, 0); },
       "truncated header"},
      {"trailing garbage",
       [](const fs::path& e, CompileCache&) { write_file(e, read_file(e) + "xx"); },
       "size mismatch"},
      {"flipped payload byte",
       [](const fs::path& e, CompileCache&) {
         std::string s = read_file(e);
         s[s.size() - 10] ^= 0x01;
         write_file(e, s);
       },
       "content hash mismatch"},
      {"flipped metadata byte",
       [](const fs::path& e, CompileCache&) {
         std::string s = read_file(e);
         s[128] ^= 0x20;
         write_file(e, s);
       },
       "content hash mismatch"},
      {"flipped hash byte",
       [](const fs::path& e, CompileCache&) {
         std::string s = read_file(e);
         s[100] ^= 0x80;
         write_file(e, s);
       },
       "content hash mismatch"},
      {"bad magic",
       [](const fs::path& e, CompileCache&) {
         std::string s = read_file(e);
         s[0] = 'X';
         write_file(e, s);
       },
       "bad magic"},
      {"future format version",
       [](const fs::path& e, CompileCache&) {
         std::string s = read_file(e);
         s[8] = 9;
         write_file(e, s);
       },
       "format version 9"},
      {"entry of another key renamed here",
       [](const fs::path& e, CompileCache& cache) {
         auto other = key_of("other");
         ASSERT_TRUE(cache.put(other, "other payload").is_ok());
         fs::rename(cache.entry_path(other), e);
       },
       "entry holds key"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    TempDir tmp;
    CompileCache writer(options_for(tmp.path()));
    auto k = key_of("victim");
    ASSERT_TRUE(writer.put(k, payload, "meta").is_ok());
    fs::path entry = writer.entry_path(k);
    c.apply(entry, writer);

    CompileCache reader(options_for(tmp.path()));
    auto r = reader.get(k);
    EXPECT_FALSE(r.hit());
    EXPECT_EQ(r.outcome, CacheOutcome::kRejected) << to_string(r.outcome) << ": " << r.reason;
    EXPECT_NE(r.reason.find(c.reason_fragment), std::string::npos) << r.reason;
    EXPECT_NE(r.reason.find(entry.string()), std::string::npos) << r.reason;
    EXPECT_FALSE(fs::exists(entry));
    EXPECT_EQ(reader.stats(false).rejected, 1u);
    EXPECT_EQ(reader.stats(false).misses, 1u);

    ASSERT_TRUE(reader.put(k, payload, "meta").is_ok());
    CompileCache again(options_for(tmp.path()));
    auto h = again.get(k);
    ASSERT_TRUE(h.hit()) << h.reason;
    EXPECT_EQ(h.value->payload, payload);
  }
}

TEST(CompileCache, DisabledByEnvironment) {
  TempDir tmp;
  CompileCache cache(options_for(tmp.path() / "c", nullptr, {{"FERRITE_CACHE", "0"}}));
  EXPECT_FALSE(cache.enabled());
  EXPECT_FALSE(cache.disk_enabled());
  EXPECT_NE(cache.disabled_reason().find("FERRITE_CACHE"), std::string::npos);
  auto k = key_of("k");
  EXPECT_TRUE(cache.put(k, "payload").is_ok());
  auto r = cache.get(k);
  EXPECT_FALSE(r.hit());
  EXPECT_EQ(r.outcome, CacheOutcome::kDisabled);
  fs::path src = tmp.write("a.so", "elf");
  EXPECT_FALSE(cache.put_file(k, src).has_value());
  EXPECT_EQ(cache.get_file(k).outcome, CacheOutcome::kDisabled);
  EXPECT_FALSE(fs::exists(tmp.path() / "c"));
}

TEST(CompileCache, UnwritableDirDegradesToMemoryWithAWarning) {
  TempDir tmp;
  fs::path blocker = tmp.write("not-a-dir", "file");
  Warnings w;
  CompileCache cache(options_for(blocker / "cache", &w));
  EXPECT_TRUE(cache.enabled());
  EXPECT_FALSE(cache.disk_enabled());
  ASSERT_EQ(w.list->size(), 1u);
  EXPECT_NE((*w.list)[0].find("disk cache disabled"), std::string::npos) << (*w.list)[0];
  EXPECT_NE(cache.disabled_reason().find("not-a-dir"), std::string::npos);
  auto k = key_of("k");
  EXPECT_TRUE(cache.put(k, "payload").is_ok());
  EXPECT_TRUE(cache.get(k).hit());  // memory level still works
  EXPECT_FALSE(cache.put_file(k, blocker).has_value());
  EXPECT_FALSE(cache.get_file(k).hit());
  EXPECT_TRUE(cache.prune(0).has_value());
}

// Runs `check` where `dir` cannot be written: as root (permissions do not bind root) in a forked
// child that drops to the unprivileged "nobody" user, otherwise with the directory made
// read-only. `check` returns a failure description, empty on success.
void expect_in_read_only_dir(const fs::path& dir, const std::function<std::string()>& check) {
  if (::geteuid() != 0) {
    fs::permissions(dir, fs::perms::owner_read | fs::perms::owner_exec);
    std::string why = check();
    fs::permissions(dir, fs::perms::owner_all);
    EXPECT_EQ(why, "");
    return;
  }
  EXPECT_EXIT(
      {
        if (::setgid(65534) != 0 || ::setuid(65534) != 0) _exit(3);
        std::string why = check();
        std::fprintf(stderr, "%s", why.c_str());
        _exit(why.empty() ? 0 : 1);
      },
      ::testing::ExitedWithCode(0), "");
}

// A cache directory that cannot be written still serves its valid entries (a shared,
// pre-populated cache; a read-only mount), and stores nothing.
TEST(CompileCache, ReadOnlyDirServesItsEntries) {
  TempDir tmp;
  fs::path dir = tmp.path() / "ro";
  auto blob = key_of("blob"), file = key_of("file"), absent = key_of("absent");
  {
    CompileCache writer(options_for(dir));
    ASSERT_TRUE(writer.disk_enabled());
    ASSERT_TRUE(writer.put(blob, "payload", "meta").is_ok());
    ASSERT_TRUE(writer.put_file(file, tmp.write("a.so", "elf bytes")).has_value());
  }
  // World-readable, as a shared cache would be (the test's umask may be stricter).
  for (const auto& e : fs::recursive_directory_iterator(dir))
    fs::permissions(e.path(),
                    fs::perms::others_read | fs::perms::group_read |
                        (e.is_directory() ? fs::perms::others_exec : fs::perms::none),
                    fs::perm_options::add);
  fs::permissions(dir, fs::perms::others_read | fs::perms::others_exec, fs::perm_options::add);
  fs::permissions(tmp.path(), fs::perms::others_exec, fs::perm_options::add);
  std::vector<std::string> before = tree(dir);
  expect_in_read_only_dir(dir, [&]() -> std::string {
    Warnings w;
    CompileCache cache(options_for(dir, &w));
    if (!cache.disk_enabled() || !cache.read_only())
      return "disk level off: " + cache.disabled_reason();
    auto b = cache.get(blob);
    if (!b.hit() || b.value->payload != "payload") return "blob entry not served: " + b.reason;
    auto f = cache.get_file(file);
    if (!f.hit() || read_file(f.value->path) != "elf bytes")
      return "file entry not served: " + f.reason;
    if (!cache.put(absent, "x").is_ok()) return "put failed instead of staying in memory";
    if (!cache.get(absent).hit()) return "memory level lost the new entry";
    if (cache.put_file(absent, f.value->path).has_value()) return "put_file stored into it";
    if (!w.list->empty()) return "warned: " + (*w.list)[0];
    return "";
  });
  EXPECT_EQ(tree(dir), before);
}

// Runs `lookup` on another thread; fails the test if it has not returned within 10 seconds, and
// then releases a reader stuck in open() on `fifo` by opening its write end.
template <class F>
void expect_returns_promptly(const fs::path& fifo, F lookup) {
  std::atomic<bool> done{false};
  std::thread t([&] {
    lookup();
    done = true;
  });
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (!done && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  if (!done) {
    ADD_FAILURE() << "cache lookup blocked on the FIFO " << fifo;
    int w = ::open(fifo.c_str(), O_WRONLY | O_NONBLOCK);
    if (w >= 0) ::close(w);
  }
  t.join();
}

// A FIFO (or any non-regular file) where an entry or an artifact should be is a miss, never a
// read that waits for a writer forever; storing the key again replaces it.
TEST(CompileCache, FifoInTheCacheIsAMissNotAHang) {
  TempDir tmp;
  CompileCache cache(disk_only(tmp.path()));
  auto blob = key_of("blob");
  fs::path entry = cache.entry_path(blob);
  fs::create_directories(entry.parent_path());
  ASSERT_EQ(::mkfifo(entry.c_str(), 0644), 0);
  expect_returns_promptly(entry, [&] {
    auto r = cache.get(blob);
    EXPECT_FALSE(r.hit());
    EXPECT_NE(r.reason.find("not a regular file"), std::string::npos) << r.reason;
  });
  ASSERT_TRUE(cache.put(blob, "payload").is_ok());
  EXPECT_TRUE(cache.get(blob).hit());

  // The artifact of a file entry.
  auto file = key_of("file");
  auto stored = cache.put_file(file, tmp.write("a.so", "elf"));
  ASSERT_TRUE(stored.has_value());
  fs::path artifact = *stored;
  ASSERT_TRUE(fs::remove(artifact));
  ASSERT_EQ(::mkfifo(artifact.c_str(), 0644), 0);
  expect_returns_promptly(artifact, [&] {
    auto r = cache.get_file(file);
    EXPECT_FALSE(r.hit());
    EXPECT_NE(r.reason.find("not a regular file"), std::string::npos) << r.reason;
  });
  ASSERT_TRUE(cache.put_file(file, tmp.write("b.so", "elf")).has_value());
  EXPECT_TRUE(cache.get_file(file).hit());
}

TEST(CompileCache, WriteFailureAfterStartIsAStatusAndOneWarning) {
  TempDir tmp;
  Warnings w;
  CompileCache cache(options_for(tmp.path(), &w));
  ASSERT_TRUE(cache.disk_enabled());
  auto k1 = key_of("k1"), k2 = key_of("k2");
  // Block both shard directories with plain files.
  for (const auto& k : {k1, k2}) tmp.write(k.hex().substr(0, 2), "blocker");
  Status s1 = cache.put(k1, "a");
  Status s2 = cache.put(k2, "b");
  EXPECT_FALSE(s1.is_ok());
  EXPECT_FALSE(s2.is_ok());
  EXPECT_NE(s1.message().find("compile cache"), std::string::npos) << s1.message();
  EXPECT_EQ(w.list->size(), 1u);
  EXPECT_EQ(cache.stats(false).write_failures, 2u);
  EXPECT_TRUE(cache.get(k1).hit());  // the memory level kept it
  EXPECT_EQ(cache.stats(false).writes, 0u);
}

TEST(CompileCache, MemoryLevelIsLruBoundedByBytes) {
  CompileCacheOptions o = options_for({});
  o.use_disk = false;
  o.memory_budget_bytes = 2 * (64 + 1000) + 10;  // room for two 1000-byte entries
  CompileCache cache(std::move(o));
  EXPECT_FALSE(cache.disk_enabled());
  auto a = key_of("a"), b = key_of("b"), c = key_of("c");
  const std::string p(1000, 'x');
  ASSERT_TRUE(cache.put(a, p).is_ok());
  ASSERT_TRUE(cache.put(b, p).is_ok());
  ASSERT_TRUE(cache.get(a).hit());  // a is now the most recently used
  ASSERT_TRUE(cache.put(c, p).is_ok());
  EXPECT_FALSE(cache.get(b).hit());
  EXPECT_TRUE(cache.get(a).hit());
  EXPECT_TRUE(cache.get(c).hit());
  CacheStats s = cache.stats();
  EXPECT_EQ(s.memory_entries, 2u);
  EXPECT_EQ(s.memory_bytes, 2u * (64 + 1000));
  EXPECT_LE(s.memory_bytes, 2u * (64 + 1000) + 10);
  // Replacing an entry does not double-count it.
  ASSERT_TRUE(cache.put(c, std::string(10, 'y')).is_ok());
  EXPECT_EQ(cache.stats().memory_bytes, (64u + 1000) + (64 + 10));
  // An entry larger than the whole budget is not kept (and does not flush the others).
  auto big = key_of("big");
  ASSERT_TRUE(cache.put(big, std::string(5000, 'z')).is_ok());
  EXPECT_FALSE(cache.get(big).hit());
  EXPECT_TRUE(cache.get(a).hit());
  cache.clear_memory();
  EXPECT_FALSE(cache.get(a).hit());
  EXPECT_EQ(cache.stats().memory_bytes, 0u);
}

TEST(CompileCache, PruneRemovesLeastRecentlyUsedByMtime) {
  TempDir tmp;
  CompileCache cache(options_for(tmp.path()));
  std::vector<CacheKey> keys;
  auto now = fs::file_time_type::clock::now();
  for (int i = 0; i < 5; ++i) {
    keys.push_back(key_of("entry" + std::to_string(i)));
    ASSERT_TRUE(cache.put(keys.back(), std::string(1000, 'a' + i)).is_ok());
    // Oldest first: entry0 was used 5 hours ago, entry4 1 hour ago.
    fs::last_write_time(cache.entry_path(keys.back()), now - std::chrono::hours(5 - i));
  }
  uint64_t entry_bytes = fs::file_size(cache.entry_path(keys[0]));
  // A hit (from a process without it in memory) refreshes entry0.
  {
    CompileCache reader(options_for(tmp.path()));
    ASSERT_TRUE(reader.get(keys[0]).hit());
  }
  // A young temp file (a write in progress elsewhere) stays; a stale one goes.
  fs::path shard = cache.entry_path(keys[0]).parent_path();
  fs::path young = tmp.write(shard.filename().string() + "/.tmp-young", "zz");
  fs::path stale = tmp.write(shard.filename().string() + "/.tmp-stale", "zz");
  fs::last_write_time(stale, now - std::chrono::hours(3));

  auto r = cache.prune(3 * entry_bytes + 2);
  ASSERT_TRUE(r.has_value()) << r.status().message();
  EXPECT_EQ(r->removed_entries, 2u);
  EXPECT_EQ(r->remaining_entries, 3u);
  EXPECT_EQ(r->remaining_bytes, 3 * entry_bytes + 2);
  EXPECT_TRUE(fs::exists(young));
  EXPECT_FALSE(fs::exists(stale));

  CompileCache fresh(options_for(tmp.path()));
  EXPECT_TRUE(fresh.get(keys[0]).hit());
  EXPECT_FALSE(fresh.get(keys[1]).hit());
  EXPECT_FALSE(fresh.get(keys[2]).hit());
  EXPECT_TRUE(fresh.get(keys[3]).hit());
  EXPECT_TRUE(fresh.get(keys[4]).hit());
  // The pruning cache's memory level forgets removed keys too.
  EXPECT_FALSE(cache.get(keys[1]).hit());

  CacheStats s = fresh.stats();
  EXPECT_EQ(s.disk_entries, 3u);
  EXPECT_EQ(s.disk_bytes, 3 * entry_bytes + 2);

  r = cache.prune(0);
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->remaining_entries, 0u);
  EXPECT_EQ(fresh.stats().disk_entries, 0u);
}

TEST(CompileCache, FileArtifactsGetStablePaths) {
  TempDir tmp;
  fs::path root = tmp.path() / "cache";
  CompileCache cache(options_for(root));
  auto k = key_of("lib");
  std::string body(300000, '\0');
  for (size_t i = 0; i < body.size(); ++i) body[i] = static_cast<char>(i * 31);
  fs::path src = tmp.write("build/libkernels.so", body);
  fs::permissions(src, fs::perms::owner_all | fs::perms::group_read);

  EXPECT_FALSE(cache.get_file(k).hit());
  auto stored = cache.put_file(k, src, "entry=forward");
  ASSERT_TRUE(stored.has_value()) << stored.status().message();
  EXPECT_EQ(stored->extension(), ".so");
  EXPECT_EQ(stored->parent_path(), cache.entry_path(k).parent_path());
  EXPECT_EQ(read_file(*stored), body);
  EXPECT_EQ(fs::status(*stored).permissions() & fs::perms::owner_exec, fs::perms::owner_exec);

  CompileCache other(options_for(root));
  auto r = other.get_file(k);
  ASSERT_TRUE(r.hit()) << r.reason;
  EXPECT_EQ(r.value->path, *stored);
  EXPECT_EQ(r.value->metadata, "entry=forward");
  // Storing the same content again keeps the path.
  auto again = other.put_file(k, src, "entry=forward");
  ASSERT_TRUE(again.has_value());
  EXPECT_EQ(*again, *stored);
  // Blob and file entries do not answer for each other.
  auto wrong = other.get(k);
  EXPECT_FALSE(wrong.hit());
  EXPECT_NE(wrong.reason.find("file artifact"), std::string::npos);
  EXPECT_TRUE(fs::exists(cache.entry_path(k)));

  // Corrupt artifact: rejected, both files removed, rebuilt afterwards.
  std::string damaged = body;
  damaged[12345] ^= 1;
  write_file(*stored, damaged);
  r = other.get_file(k);
  EXPECT_EQ(r.outcome, CacheOutcome::kRejected);
  EXPECT_NE(r.reason.find("hash mismatch"), std::string::npos) << r.reason;
  EXPECT_FALSE(fs::exists(*stored));
  EXPECT_FALSE(fs::exists(cache.entry_path(k)));

  ASSERT_TRUE(cache.put_file(k, src).has_value());
  fs::resize_file(*stored, 100);
  r = other.get_file(k);
  EXPECT_EQ(r.outcome, CacheOutcome::kRejected);
  EXPECT_NE(r.reason.find("bytes, expected"), std::string::npos) << r.reason;

  ASSERT_TRUE(cache.put_file(k, src).has_value());
  fs::remove(*stored);
  r = other.get_file(k);
  EXPECT_EQ(r.outcome, CacheOutcome::kRejected);
  EXPECT_NE(r.reason.find("missing"), std::string::npos) << r.reason;

  // A damaged entry for a file artifact is caught like any other.
  ASSERT_TRUE(cache.put_file(k, src).has_value());
  std::string e = read_file(cache.entry_path(k));
  e[e.size() - 1] ^= 1;
  write_file(cache.entry_path(k), e);
  r = other.get_file(k);
  EXPECT_EQ(r.outcome, CacheOutcome::kRejected);

  EXPECT_FALSE(cache.put_file(k, tmp.path() / "no-such-file.so").has_value());
  EXPECT_FALSE(cache.put_file(k, tmp.path()).has_value());  // a directory

  // prune(0) takes artifacts with their entries.
  ASSERT_TRUE(cache.put_file(k, src).has_value());
  ASSERT_TRUE(cache.prune(0).has_value());
  EXPECT_TRUE(tree(root).empty());
}

TEST(CompileCache, PruneCleansOrphanedAndUnreferencedArtifacts) {
  TempDir tmp;
  fs::path root = tmp.path() / "cache";
  CompileCache cache(options_for(root));
  auto k = key_of("lib");
  auto first = cache.put_file(k, tmp.write("a.so", "first build"));
  auto second = cache.put_file(k, tmp.write("b.so", "second build"));
  ASSERT_TRUE(first.has_value() && second.has_value());
  ASSERT_NE(*first, *second);
  auto old = fs::file_time_type::clock::now() - std::chrono::hours(2);
  fs::last_write_time(*first, old);
  fs::last_write_time(*second, old);  // referenced: kept however old
  // Artifacts whose entry never arrived: an old one is litter, a young one may be mid-write.
  std::string k2 = key_of("crashed").hex(), k3 = key_of("in-progress").hex();
  fs::path stale_orphan = root / k2.substr(0, 2) / (k2 + "-0123456789abcdef.so");
  fs::path young_orphan = root / k3.substr(0, 2) / (k3 + "-0123456789abcdef.so");
  fs::create_directories(stale_orphan.parent_path());
  fs::create_directories(young_orphan.parent_path());
  write_file(stale_orphan, "x");
  write_file(young_orphan, "y");
  fs::last_write_time(stale_orphan, old);

  auto r = cache.prune(UINT64_MAX);
  ASSERT_TRUE(r.has_value()) << r.status().message();
  EXPECT_EQ(r->removed_entries, 0u);
  EXPECT_EQ(r->remaining_entries, 1u);
  EXPECT_FALSE(fs::exists(*first));
  EXPECT_TRUE(fs::exists(*second));
  EXPECT_FALSE(fs::exists(stale_orphan));
  EXPECT_TRUE(fs::exists(young_orphan));
  auto hit = cache.get_file(k);
  ASSERT_TRUE(hit.hit()) << hit.reason;
  EXPECT_EQ(hit.value->path, *second);
  EXPECT_EQ(read_file(hit.value->path), "second build");
}

TEST(CompileCache, GarbageFilesInTheTreeAreHarmless) {
  TempDir tmp;
  CompileCache cache(options_for(tmp.path()));
  auto k = key_of("k");
  fs::path entry = cache.entry_path(k);
  fs::create_directories(entry.parent_path());
  write_file(entry, std::string(300, '\x5a'));
  write_file(entry.parent_path() / "README", "not ours");
  write_file(tmp.path() / "zz-not-a-shard", "not ours");
  auto r = cache.get(k);
  EXPECT_EQ(r.outcome, CacheOutcome::kRejected);
  EXPECT_NE(r.reason.find("bad magic"), std::string::npos) << r.reason;
  // A directory where the entry should be is an I/O problem, not a hit and not a crash.
  fs::create_directories(entry);
  r = cache.get(k);
  EXPECT_FALSE(r.hit());
  EXPECT_EQ(r.outcome, CacheOutcome::kIoError) << r.reason;
  fs::remove(entry);
  ASSERT_TRUE(cache.prune(0).has_value());
  EXPECT_TRUE(fs::exists(entry.parent_path() / "README"));  // prune only touches its own files
  EXPECT_TRUE(fs::exists(tmp.path() / "zz-not-a-shard"));
  ASSERT_TRUE(cache.put(k, "ok").is_ok());
  EXPECT_TRUE(CompileCache(options_for(tmp.path())).get(k).hit());
}

// A real shared object round-trips through the cache and loads with dlopen.
TEST(CompileCache, StoredSharedObjectLoads) {
  fs::path lib;
  for (const char* candidate :
       {"/usr/lib/x86_64-linux-gnu/libz.so.1", "/lib/x86_64-linux-gnu/libz.so.1",
        "/usr/lib64/libz.so.1", "/usr/lib/aarch64-linux-gnu/libz.so.1"})
    if (fs::exists(candidate)) lib = candidate;
  if (lib.empty()) GTEST_SKIP() << "no libz.so.1 to use as a sample shared object";
  TempDir tmp;
  CompileCache cache(options_for(tmp.path()));
  auto k = key_of("zlib");
  ASSERT_TRUE(cache.put_file(k, lib).has_value());
  CompileCache reader(options_for(tmp.path()));
  auto r = reader.get_file(k);
  ASSERT_TRUE(r.hit()) << r.reason;
  void* handle = ::dlopen(r.value->path.c_str(), RTLD_NOW | RTLD_LOCAL);
  ASSERT_NE(handle, nullptr) << ::dlerror();
  EXPECT_NE(::dlsym(handle, "zlibVersion"), nullptr);
  ::dlclose(handle);
}

}  // namespace
}  // namespace ferrite
