// A C++ program against the installed libferrite through ferrite.hpp (built with
// find_package(ferrite) by tests/capi/consumer_test.sh): loads MODEL on DEVICE ("" = the
// default), prints its inputs and outputs, runs INPUT.pb and compares with EXPECTED.pb.
#include <cmath>
#include <cstdio>
#include <ferrite/ferrite.hpp>

int main(int argc, char** argv) {
  if (argc != 5) {
    std::fprintf(stderr, "usage: convnet_cpp MODEL INPUT.pb EXPECTED.pb DEVICE\n");
    return 2;
  }
  try {
    ferrite::SessionOptions opts;
    opts.device = argv[4];
    ferrite::Session session(argv[1], opts);
    std::printf("running on %s\n", session.device().c_str());
    for (const auto& io : session.inputs()) {
      std::printf("input %s rank %d:", io.name.c_str(), io.rank);
      for (const auto& d : io.dims)
        std::printf(" %s", d.size >= 0 ? std::to_string(d.size).c_str() : d.symbol.c_str());
      std::printf("\n");
    }
    std::vector<ferrite::Value> in;
    in.push_back(ferrite::Value::load_pb(argv[2]));
    ferrite::Value expected = ferrite::Value::load_pb(argv[3]);
    ferrite_run_stats stats{};
    stats.struct_size = sizeof stats;
    std::vector<ferrite::Value> out = session.run({}, in, &stats);
    if (out.size() != 1 || out[0].dims() != expected.dims()) {
      std::fprintf(stderr, "convnet.cpp: output shape differs from the expected one\n");
      return 1;
    }
    const float* got = out[0].data<float>();
    const float* want = expected.data<float>();
    const size_t n = out[0].bytes() / sizeof(float);
    double worst = 0;
    for (size_t i = 0; i < n; ++i) {
      double d = std::fabs(double(got[i]) - double(want[i]));
      worst = std::max(worst, d);
      if (d > 1e-4 + 1e-4 * std::fabs(double(want[i]))) {
        std::fprintf(stderr, "convnet.cpp: element %zu is %g, expected %g\n", i, got[i], want[i]);
        return 1;
      }
    }
    std::printf("C++: %zu outputs match (max abs diff %g, %.3f ms, arena %lld bytes)\n", n, worst,
                stats.wall_seconds * 1e3, static_cast<long long>(stats.arena_bytes));
    // A mistake comes back as an exception with the status's message.
    try {
      session.run({"no_such_input"}, in);
      std::fprintf(stderr, "convnet.cpp: a wrong input name was accepted\n");
      return 1;
    } catch (const ferrite::Error& e) {
      std::printf("wrong input name: %s\n", e.what());
    }
  } catch (const ferrite::Error& e) {
    std::fprintf(stderr, "convnet.cpp: %s (code %d)\n", e.what(), static_cast<int>(e.code()));
    return 1;
  }
  return 0;
}
