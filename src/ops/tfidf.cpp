// TfIdfVectorizer (opset 9) over integer tokens (string pools are not supported: ferrite has no
// string type). Each row of X (or X itself when 1-D) counts the n-grams of the pool it contains,
// for n in [min_gram_length, max_gram_length] and gaps of 0..max_skip_count tokens between
// consecutive items (unigrams have no gaps, so they count once per position).
#include <algorithm>
#include <map>

#include "ops/helpers.h"
#include "ops/numeric_cast.h"

namespace ferrite {

namespace {

struct TfIdfPool {
  int64_t min_n, max_n, max_skip, width;
  std::string mode;
  std::map<std::vector<int64_t>, int64_t> ngrams;  // n-gram -> output column
  std::vector<float> weights;                      // per output column (1 when absent)
};

template <class Ctx>
Expected<TfIdfPool> tfidf_pool(const Ctx& ctx) {
  const Node& n = ctx.node();
  TfIdfPool p;
  p.min_n = n.attr_int("min_gram_length");
  p.max_n = n.attr_int("max_gram_length");
  p.max_skip = n.attr_int("max_skip_count");
  p.mode = n.attr_string("mode");
  if (p.mode != "TF" && p.mode != "IDF" && p.mode != "TFIDF")
    return ctx.error("mode must be TF, IDF or TFIDF, got '", p.mode, "'");
  if (p.min_n < 1 || p.max_n < p.min_n || p.max_skip < 0)
    return ctx.error("need 1 <= min_gram_length <= max_gram_length and max_skip_count >= 0");
  if (n.has_attr("pool_strings"))
    return unsupported(n.describe(), ": string pools are not supported");
  std::vector<int64_t> pool = n.attr_ints("pool_int64s");
  std::vector<int64_t> counts = n.attr_ints("ngram_counts");
  std::vector<int64_t> indexes = n.attr_ints("ngram_indexes");
  // ngram_counts[i] is where the (i+1)-grams start in the pool.
  size_t next = 0;
  for (size_t i = 0; i < counts.size(); ++i) {
    const int64_t len = static_cast<int64_t>(i) + 1;
    const int64_t begin = counts[i];
    const int64_t end = i + 1 < counts.size() ? counts[i + 1] : static_cast<int64_t>(pool.size());
    if (begin < 0 || end < begin || end > static_cast<int64_t>(pool.size()) ||
        (end - begin) % len != 0)
      return ctx.error("ngram_counts does not split pool_int64s into whole n-grams");
    for (int64_t k = begin; k < end; k += len) {
      if (next >= indexes.size()) return ctx.error("ngram_indexes is shorter than the pool");
      if (indexes[next] < 0) return ctx.error("ngram_indexes must be >= 0");
      p.ngrams[std::vector<int64_t>(pool.begin() + k, pool.begin() + k + len)] = indexes[next++];
    }
  }
  p.width = indexes.empty() ? 0 : *std::max_element(indexes.begin(), indexes.end()) + 1;
  p.weights = n.attr_floats("weights");
  if (!p.weights.empty() && static_cast<int64_t>(p.weights.size()) < p.width)
    return ctx.error("weights must have one entry per output column");
  return p;
}

Status infer_tfidf(InferContext& ctx) {
  FERRITE_ASSIGN_OR_RETURN(TfIdfPool p, tfidf_pool(ctx));
  const Shape& x = ctx.input_shape(0);
  if (!x.rank_known()) {
    ctx.set_output(0, DType::kF32, Shape::unknown_rank());
    return Status::ok();
  }
  if (x.rank() == 1) {
    ctx.set_output(0, DType::kF32, Shape({Dim(p.width)}));
  } else if (x.rank() == 2) {
    ctx.set_output(0, DType::kF32, Shape({x.dims()[0], Dim(p.width)}));
  } else {
    return ctx.error("X must be 1-D or 2-D");
  }
  return Status::ok();
}

Status tfidf_kernel(KernelContext& ctx) {
  FERRITE_ASSIGN_OR_RETURN(TfIdfPool p, tfidf_pool(ctx));
  const Tensor& x = ctx.input(0);
  if (x.rank() != 1 && x.rank() != 2) return ctx.error("X must be 1-D or 2-D");
  const int64_t rows = x.rank() == 1 ? 1 : x.dims()[0];
  const int64_t len = x.dims().back();
  std::vector<int64_t> out_dims =
      x.rank() == 1 ? std::vector<int64_t>{p.width} : std::vector<int64_t>{rows, p.width};
  FERRITE_ASSIGN_OR_RETURN(Tensor * y, ctx.allocate_output(0, DType::kF32, out_dims));
  std::vector<int64_t> tok(static_cast<size_t>(x.numel()));
  visit_dtype(x.dtype(), [&]<class T>() {
    for (size_t i = 0; i < tok.size(); ++i)
      tok[i] = static_cast<int64_t>(to_double(x.data<T>()[i]));
  });
  float* py = y->data<float>();
  std::vector<int64_t> gram;
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t* t = &tok[r * len];
    std::vector<double> count(static_cast<size_t>(p.width), 0.0);
    for (int64_t n = p.min_n; n <= p.max_n; ++n) {
      const int64_t skips = n == 1 ? 0 : p.max_skip;
      for (int64_t skip = 0; skip <= skips; ++skip) {
        const int64_t step = skip + 1;
        for (int64_t start = 0; start + (n - 1) * step < len; ++start) {
          gram.clear();
          for (int64_t k = 0; k < n; ++k) gram.push_back(t[start + k * step]);
          auto it = p.ngrams.find(gram);
          if (it != p.ngrams.end()) count[it->second] += 1;
        }
      }
    }
    for (int64_t c = 0; c < p.width; ++c) {
      double w = p.weights.empty() ? 1.0 : p.weights[c];
      double v = p.mode == "TF"    ? count[c]
                 : p.mode == "IDF" ? (count[c] > 0 ? w : 0)
                                   : count[c] * w;
      py[r * p.width + c] = static_cast<float>(v);
    }
  }
  return Status::ok();
}

}  // namespace

void register_tfidf_ops(OpRegistry& r) {
  r.add(OpSchemaBuilder("TfIdfVectorizer")
            .versions(9)
            .inputs(1)
            .outputs(1)
            .required_attr("max_gram_length", AttrType::kInt)
            .required_attr("max_skip_count", AttrType::kInt)
            .required_attr("min_gram_length", AttrType::kInt)
            .required_attr("mode", AttrType::kString)
            .required_attr("ngram_counts", AttrType::kInts)
            .required_attr("ngram_indexes", AttrType::kInts)
            .optional_attr("pool_int64s", AttrType::kInts)
            .optional_attr("pool_strings", AttrType::kStrings)
            .optional_attr("weights", AttrType::kFloats)
            .types("T", {0}, {DType::kI32, DType::kI64})
            .infer(infer_tfidf)
            .kernel(tfidf_kernel));
}

}  // namespace ferrite
