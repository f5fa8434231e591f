// The host side of fe_dwconv_nchw (cuda_dwconv_nchw_source.inc): which calls it takes and how a
// call is cut into blocks of shared-memory tiles.
#include <algorithm>
#include <cstdint>
#include <optional>

#include "backends/cuda/cuda_library.h"

namespace ferrite::cuda {

namespace {

// The kernel's DwNchwPlan, field for field.
struct DwNchwPlan {
  int planes, pb, strips, th, ir, sw, cb, blocks;
  int vec;
};

constexpr int kTileW = 4, kTileH = 4;      // a thread's outputs (OWT x OHT in the kernel)
constexpr int64_t kSharedMax = 48 * 1024;  // without opting in to more per block
constexpr int kBlockMax = 256;

struct Launch {
  DwNchwPlan plan;
  int threads;
  int64_t shared_bytes;
};

int64_t ceil_div(int64_t a, int64_t b) {
  return (a + b - 1) / b;
}

// A block takes `pb` whole planes (small planes) or a strip of `rgs` row groups of one plane:
// about kBlockMax thread tiles, fewer where that leaves under two blocks per SM, and the staged
// rows within kSharedMax. Nullopt when one row group of one plane does not fit.
std::optional<Launch> plan_for(const ConvParams& p, int sms) {
  const int64_t k = p.KW, s = p.sw;
  const int64_t xw4 = ceil_div((kTileW - 1) * s + k, 4);
  const int64_t cb = ceil_div(p.OW, kTileW), rg_plane = ceil_div(p.OH, kTileH);
  const int64_t planes = p.N * p.C, per_plane = rg_plane * cb;
  int64_t bt = kBlockMax;
  const int64_t items = planes * per_plane;
  if (items < 2 * sms * bt) bt = std::clamp<int64_t>(ceil_div(items, 2 * sms * 32) * 32, 64, bt);
  int64_t pb = 1, rgs = rg_plane;
  if (per_plane >= bt) {
    rgs = std::clamp<int64_t>(bt / cb, 1, rg_plane);
  } else {
    pb = std::clamp<int64_t>(bt / per_plane, 1, planes);
  }
  const int64_t sw = (cb - 1) * kTileW * s + xw4 * 4;
  auto shared = [&](int64_t pb_, int64_t rgs_) {
    const int64_t ir = (rgs_ * kTileH - 1) * s + k;
    return (pb_ * ir * sw + pb_ * k * k) * static_cast<int64_t>(sizeof(float));
  };
  while (shared(pb, rgs) > kSharedMax) {
    if (pb > 1) {
      pb = std::max<int64_t>(1, pb * kSharedMax / shared(pb, rgs));
      if (shared(pb, rgs) > kSharedMax && pb > 1) --pb;
    } else if (rgs > 1) {
      --rgs;
    } else {
      return std::nullopt;
    }
  }
  Launch l;
  DwNchwPlan& q = l.plan;
  q.planes = static_cast<int>(planes);
  q.pb = static_cast<int>(pb);
  q.th = static_cast<int>(rgs * kTileH);
  q.ir = static_cast<int>((q.th - 1) * s + k);
  q.sw = static_cast<int>(sw);
  q.cb = static_cast<int>(cb);
  q.strips = static_cast<int>(ceil_div(rg_plane, rgs));
  const int64_t blocks = ceil_div(planes, pb) * q.strips;
  if (blocks > INT32_MAX) return std::nullopt;
  q.blocks = static_cast<int>(blocks);
  l.threads = static_cast<int>(std::min<int64_t>(kBlockMax, ceil_div(pb * rgs * cb, 32) * 32));
  l.shared_bytes = shared(pb, rgs);
  return l;
}

}  // namespace

bool LibraryKernels::dwconv_nchw_takes(const ConvParams& p, DType dtype) {
  const int64_t in = p.N * p.C * p.H * p.W, out = p.N * p.K * p.OH * p.OW;
  const bool square = p.KH == p.KW && (p.KW == 3 || p.KW == 5 || p.KW == 7);
  return dtype == DType::kF32 && p.groups == p.C && p.K == p.C && square && p.sh == p.sw &&
         (p.sw == 1 || p.sw == 2) && p.dh == 1 && p.dw == 1 && p.ph >= 0 && p.pw >= 0 &&
         in < INT32_MAX && out < INT32_MAX && plan_for(p, 1).has_value();
}

Status LibraryKernels::dwconv_nchw(const void* x, const void* w, const void* bias, const void* res,
                                   void* y, const ConvParams& p) {
  auto l = plan_for(p, sms_);
  if (!l) return err("cuda: depthwise convolution of width ", p.OW, " does not fit a block");
  ConvParams cp = p;
  DwNchwPlan q = l->plan;
  auto aligned = [](const void* v) { return reinterpret_cast<uintptr_t>(v) % 16 == 0; };
  q.vec = p.OW % 4 == 0 && aligned(y) && aligned(res);
  const int f = (p.KW == 3 ? 0 : p.KW == 5 ? 2 : 4) + (p.sw == 2 ? 1 : 0);
  void* args[] = {&x, &w, &bias, &res, &y, &cp, &q};
  const int64_t grid[3] = {std::min<int64_t>(q.blocks, int64_t{sms_} * 4), 1, 1};
  const int block[2] = {l->threads, 1};
  return launch3(dwconv_nchw_[f], grid, block, args, static_cast<unsigned>(l->shared_bytes));
}

}  // namespace ferrite::cuda
