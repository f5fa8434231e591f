// The per-op table, second half: data movement, indexing, normalization and misc (the internal
// ferrite.* ops: fused_op_cases.cpp). Indices are drawn inside their valid ranges; shapes, axes and
// pads are constants as exporters emit them.
#include <limits>

#include "cts/case_util.h"
#include "cts/model_builder.h"

namespace ferrite::cts {

namespace {

using V = ValueGen;
const std::string N = "N";
Attribute I(std::vector<int64_t> v) {
  return Attribute(std::move(v));
}
Attribute i(int64_t v) {
  return Attribute(v);
}

// `op` over one runtime input x of `dims` plus constant operands, for every listed dtype.
void data_op(const OpSchema& s, std::vector<Case>& out, const std::string& v,
             std::vector<DimSpec> dims, std::vector<TensorSpec> rest, Attrs at = {},
             std::vector<DType> types = {kF32}, int nout = 1) {
  for (DType t : types) {
    std::vector<TensorSpec> ins = {in("x", t, dims)};
    for (const auto& r : rest) ins.push_back(r);
    Case c = single(s.name, (t == kF32 ? "" : dtype_tag(t) + "/") + v, ins, at, nout);
    bool symbolic = false;
    for (const auto& d : dims) symbolic |= std::holds_alternative<std::string>(d);
    out.push_back(symbolic ? with_runs(std::move(c), {4}) : std::move(c));
  }
}

const std::vector<DType> kMany = {kF32, kI64, kBool, kF16};

void shape_ops(std::map<std::string, CaseFn>& m) {
  m["Reshape"] = [](const OpSchema& s, std::vector<Case>& out) {
    data_op(s, out, "infer-dim", {2, 3, 4}, {ints("shape", {4, -1})}, {}, kMany);
    data_op(s, out, "copy-dim", {2, 3, 4}, {ints("shape", {0, 12})});
    data_op(s, out, "symbolic", {N, 3, 4}, {ints("shape", {0, 2, 6})});
    data_op(s, out, "to-scalar", {1, 1}, {ints("shape", {})});
  };
  m["Flatten"] = [](const OpSchema& s, std::vector<Case>& out) {
    for (int64_t a : {0, 1, 2, -1})
      data_op(s, out, "axis" + std::to_string(a), {2, 3, 4}, {}, {{"axis", i(a)}});
    data_op(s, out, "symbolic", {N, 3, 4}, {}, {}, {kF32, kI32});
  };
  m["Squeeze"] = [](const OpSchema& s, std::vector<Case>& out) {
    data_op(s, out, "axes", {2, 1, 3, 1}, {ints("axes", {1, -1})}, {}, kMany);
    data_op(s, out, "all", {1, 3, 1}, {});
  };
  m["Unsqueeze"] = [](const OpSchema& s, std::vector<Case>& out) {
    data_op(s, out, "front-back", {2, 3}, {ints("axes", {0, 3})}, {}, kMany);
    data_op(s, out, "symbolic", {N, 3}, {ints("axes", {1})});
  };
  m["Transpose"] = [](const OpSchema& s, std::vector<Case>& out) {
    data_op(s, out, "default", {2, 3, 4}, {}, {}, kMany);
    data_op(s, out, "swap-last", {2, 3, 4}, {}, {{"perm", I({0, 2, 1})}});
    data_op(s, out, "large-2d", {67, 131}, {}, {}, {kF32, kI64});
    data_op(s, out, "4d", {2, 3, 4, 5}, {}, {{"perm", I({2, 0, 3, 1})}});
    data_op(s, out, "symbolic", {N, 5, 6}, {}, {{"perm", I({1, 0, 2})}});
  };
  m["Concat"] = [](const OpSchema& s, std::vector<Case>& out) {
    for (DType t : kMany)
      out.push_back(single(s.name, dtype_tag(t) + "/axis1",
                           {in("a", t, {2, 3}), in("b", t, {2, 1}), in("c", t, {2, 4})},
                           {{"axis", i(1)}}));
    out.push_back(single(s.name, "f32/axis0-one", {in("a", kF32, {3, 2})}, {{"axis", i(0)}}));
    // Rows of whole 16-byte units (a GPU's one-kernel concat): channels-last bf16 feature maps,
    // and more inputs than one launch takes (32).
    out.push_back(single(s.name, "bf16/channels-last",
                         {in("a", kBF16, {2, 3, 3, 16}), in("b", kBF16, {2, 3, 3, 8}),
                          in("c", kBF16, {2, 3, 3, 24})},
                         {{"axis", i(3)}}));
    std::vector<TensorSpec> many;
    for (int k = 0; k < 35; ++k) many.push_back(in("x" + std::to_string(k), kF32, {2, 3, 4}));
    out.push_back(single(s.name, "f32/35-inputs", many, {{"axis", i(2)}}));
    out.push_back(single(s.name, "f32/with-constant",
                         {in("a", kF32, {2, 3}), cst("b", kF32, {1, 3}, V::uniform(-1, 1))},
                         {{"axis", i(-2)}}));
    out.push_back(
        with_runs(single(s.name, "f32/symbolic", {in("a", kF32, {N, 3}), in("b", kF32, {N, 2})},
                         {{"axis", i(1)}}),
                  {5}));
  };
  m["Split"] = [](const OpSchema& s, std::vector<Case>& out) {
    data_op(s, out, "sizes", {3, 5}, {ints("split", {2, 3})}, {{"axis", i(1)}}, kMany, 2);
    data_op(s, out, "num-outputs", {6, 2}, {}, {{"num_outputs", i(3)}}, {kF32}, 3);
    data_op(s, out, "uneven", {7, 2}, {}, {{"num_outputs", i(2)}}, {kF32}, 2);
  };
  m["Expand"] = [](const OpSchema& s, std::vector<Case>& out) {
    data_op(s, out, "column", {3, 1}, {ints("shape", {2, 3, 4})}, {}, kMany);
    data_op(s, out, "ones", {1, 4}, {ints("shape", {3, 1})});
  };
  m["Tile"] = [](const OpSchema& s, std::vector<Case>& out) {
    data_op(s, out, "repeats", {2, 3}, {ints("repeats", {2, 3})}, {}, kMany);
    data_op(s, out, "3d", {2, 1, 3}, {ints("repeats", {1, 4, 1})});
  };
  m["Identity"] = [](const OpSchema& s, std::vector<Case>& out) {
    data_op(s, out, "x", {3, 4}, {}, {}, kMany);
  };
  m["Size"] = [](const OpSchema& s, std::vector<Case>& out) {
    data_op(s, out, "x", {3, 4}, {}, {}, {kF32, kI64});
    data_op(s, out, "symbolic", {N, 4}, {});
  };
  m["Slice"] = [](const OpSchema& s, std::vector<Case>& out) {
    auto sl = [&](const std::string& v, std::vector<DimSpec> dims, std::vector<int64_t> st,
                  std::vector<int64_t> en, std::vector<int64_t> ax, std::vector<int64_t> steps,
                  std::vector<DType> types = {kF32}) {
      std::vector<TensorSpec> rest = {ints("starts", st), ints("ends", en)};
      if (!ax.empty()) rest.push_back(ints("axes", ax));
      if (!steps.empty()) rest.push_back(ints("steps", steps));
      data_op(s, out, v, std::move(dims), rest, {}, types);
    };
    sl("basic", {4, 6}, {1}, {5}, {1}, {}, kMany);
    sl("negative", {4, 6}, {-3, 0}, {-1, 100}, {1, 0}, {});
    sl("step2", {5, 7}, {0, 1}, {5, 7}, {0, 1}, {2, 3});
    sl("reverse", {4, 6}, {-1}, {-100}, {1}, {-1});
    sl("no-axes", {4, 6}, {1, 2}, {3, 5}, {}, {});
    sl("symbolic", {N, 6}, {1, 0}, {INT64_MAX, 4}, {0, 1}, {});
  };
  m["Pad"] = [](const OpSchema& s, std::vector<Case>& out) {
    data_op(s, out, "constant", {3, 4}, {ints("pads", {1, 2, 0, 1}), cst("v", kF32, {}, {0.5})}, {},
            {kF32});
    data_op(s, out, "zeros", {3, 4}, {ints("pads", {0, 1, 2, 0})}, {}, {kI64, kBool});
    for (const char* mode : {"reflect", "edge", "wrap"})
      data_op(s, out, mode, {2, 4, 5}, {ints("pads", {0, 1, 2, 0, 1, 1})}, {{"mode", mode}});
    data_op(s, out, "crop", {4, 5}, {ints("pads", {-1, 1, 0, -2})});
    data_op(s, out, "axes", {2, 3, 4}, {ints("pads", {1, 2}), omitted(), ints("axes", {-1})});
    data_op(s, out, "symbolic", {N, 4}, {ints("pads", {0, 1, 0, 1})});
    // Swin's window padding of channels-last maps: H and W padded at the end, bf16.
    data_op(s, out, "nhwc-end", {2, 5, 6, 8}, {ints("pads", {0, 0, 0, 0, 0, 2, 1, 0})}, {},
            {kBF16});
  };
  m["CenterCropPad"] = [](const OpSchema& s, std::vector<Case>& out) {
    data_op(s, out, "crop-and-pad", {5, 6}, {ints("shape", {3, 8})}, {}, {kF32, kI32});
    data_op(s, out, "axes", {2, 5, 6}, {ints("shape", {4})}, {{"axes", I({-1})}});
  };
  m["Trilu"] = [](const OpSchema& s, std::vector<Case>& out) {
    data_op(s, out, "upper", {4, 5}, {}, {}, {kF32, kI64, kBool});
    data_op(s, out, "lower-k1", {2, 4, 5}, {ints("k", {1}, true)}, {{"upper", i(0)}});
    data_op(s, out, "upper-k-2", {5, 4}, {ints("k", {-2}, true)});
  };
  m["DepthToSpace"] = [](const OpSchema& s, std::vector<Case>& out) {
    data_op(s, out, "dcr", {1, 8, 2, 3}, {}, {{"blocksize", i(2)}}, {kF32, kI32});
    data_op(s, out, "crd", {2, 8, 3, 2}, {}, {{"blocksize", i(2)}, {"mode", "CRD"}});
  };
  m["SpaceToDepth"] = [](const OpSchema& s, std::vector<Case>& out) {
    data_op(s, out, "b2", {1, 2, 4, 6}, {}, {{"blocksize", i(2)}}, {kF32, kI32});
  };
}

void indexing_ops(std::map<std::string, CaseFn>& m) {
  m["Gather"] = [](const OpSchema& s, std::vector<Case>& out) {
    // Negative indices count from the end.
    data_op(s, out, "axis0", {5, 4}, {in("idx", kI64, {3}, V::ints(-5, 4))}, {}, kMany);
    data_op(s, out, "axis1-2d-idx", {3, 6, 2}, {in("idx", kI64, {2, 2}, V::ints(0, 5))},
            {{"axis", i(1)}});
    data_op(s, out, "scalar-idx", {5, 3}, {cst("idx", kI64, {}, {2})});
    data_op(s, out, "i32-idx", {4, 3}, {in("idx", kI32, {5}, V::ints(0, 3))});
    data_op(s, out, "embedding", {10, 8}, {in("idx", kI64, {2, 3}, V::ints(0, 9))});
    out.push_back(with_runs(single(s.name, "const-table-symbolic-idx",
                                   {cst("table", kF32, {6, 4}, V::uniform(-1, 1)),
                                    in("idx", kI64, {N}, V::ints(0, 5))}),
                            {7}));
  };
  m["GatherElements"] = [](const OpSchema& s, std::vector<Case>& out) {
    data_op(s, out, "axis1", {3, 4}, {in("idx", kI64, {3, 2}, V::ints(-4, 3))}, {{"axis", i(1)}},
            {kF32, kI64});
    data_op(s, out, "axis0", {3, 4}, {in("idx", kI32, {2, 4}, V::ints(0, 2))});
  };
  m["GatherND"] = [](const OpSchema& s, std::vector<Case>& out) {
    data_op(s, out, "pairs", {3, 4, 5}, {in("idx", kI64, {2, 2}, V::ints(0, 2))}, {}, {kF32, kI32});
    data_op(s, out, "full", {3, 4}, {in("idx", kI64, {5, 2}, V::ints(0, 2))});
    data_op(s, out, "batch-dims", {2, 3, 4}, {in("idx", kI64, {2, 1}, V::ints(0, 2))},
            {{"batch_dims", i(1)}});
  };
  m["ScatterElements"] = [](const OpSchema& s, std::vector<Case>& out) {
    // Distinct target rows per column: without a reduction the result must not depend on order.
    data_op(
        s, out, "none", {3, 4},
        {in("idx", kI64, {2, 4}, V::exactly({0, 2, 1, 0, 2, 0, 0, 1})), in("upd", kF32, {2, 4})},
        {{"axis", i(0)}});
    data_op(s, out, "add-duplicates", {3, 4},
            {in("idx", kI64, {3, 2}, V::ints(0, 3)), in("upd", kF32, {3, 2})},
            {{"axis", i(1)}, {"reduction", "add"}});
    data_op(s, out, "max", {4, 3},
            {in("idx", kI64, {3, 3}, V::ints(0, 3)), in("upd", kF32, {3, 3})},
            {{"reduction", "max"}});
    // 16-bit storage reduced in place (a max-pool gradient in bf16); duplicates in one column.
    out.push_back(single(
        s.name, "add-bf16",
        {in("x", kBF16, {5, 6}), in("idx", kI32, {4, 6}, V::ints(-5, 4)), in("upd", kBF16, {4, 6})},
        {{"axis", i(0)}, {"reduction", "add"}}));
  };
  m["ScatterND"] = [](const OpSchema& s, std::vector<Case>& out) {
    data_op(s, out, "rows", {4, 3},
            {in("idx", kI64, {2, 1}, V::exactly({3, 1})), in("upd", kF32, {2, 3})});
    data_op(s, out, "elements", {4, 3},
            {in("idx", kI64, {2, 2}, V::exactly({0, 2, 3, 1})), in("upd", kF32, {2})});
    data_op(s, out, "mul-duplicates", {4, 3},
            {in("idx", kI64, {3, 1}, V::exactly({1, 2, 1})), in("upd", kF32, {3, 3})},
            {{"reduction", "mul"}});
    // An embedding's gradient: rows of a [vocab, width] table accumulated, ids repeated.
    data_op(s, out, "add-rows", {7, 16},
            {in("idx", kI64, {2, 5, 1}, V::ints(-7, 6)), in("upd", kF32, {2, 5, 16})},
            {{"reduction", "add"}});
  };
  m["OneHot"] = [](const OpSchema& s, std::vector<Case>& out) {
    out.push_back(single(s.name, "last-axis",
                         {in("idx", kI64, {2, 3}, V::ints(-5, 4)), cst("depth", kI64, {}, {5}),
                          cst("values", kF32, {2}, {-1, 3})}));
    out.push_back(single(s.name, "axis0-i32",
                         {in("idx", kI32, {4}, V::ints(0, 3)), cst("depth", kI64, {}, {4}),
                          cst("values", kI64, {2}, {0, 1})},
                         {{"axis", i(0)}}));
  };
  m["NonZero"] = [](const OpSchema& s, std::vector<Case>& out) {
    // Integers in [-1, 1]: about a third are zero.
    data_op(s, out, "x", {3, 4}, {}, {}, {kI64, kBool});
    out.push_back(single(s.name, "f32", {in("x", kF32, {3, 4}, V::ints(-1, 1))}));
  };
}

void misc_ops(std::map<std::string, CaseFn>& m) {
  m["CumSum"] = [](const OpSchema& s, std::vector<Case>& out) {
    data_op(s, out, "axis1", {3, 5}, {ints("axis", {1}, true)}, {}, {kF32, kI32, kI64, kF64});
    data_op(s, out, "exclusive-reverse", {3, 5}, {ints("axis", {0}, true)},
            {{"exclusive", i(1)}, {"reverse", i(1)}});
    data_op(s, out, "symbolic", {N, 6}, {ints("axis", {-1}, true)});
  };
  m["TopK"] = [](const OpSchema& s, std::vector<Case>& out) {
    data_op(s, out, "largest", {3, 8}, {ints("k", {3})}, {}, {kF32, kI64}, 2);
    data_op(s, out, "smallest-axis0", {6, 4}, {ints("k", {2})}, {{"axis", i(0)}, {"largest", i(0)}},
            {kF32}, 2);
  };
  m["Dropout"] = [](const OpSchema& s, std::vector<Case>& out) {
    data_op(s, out, "inference", {3, 4}, {}, {}, {kF32, kF16});
    data_op(s, out, "ratio-mask", {3, 4}, {cst("ratio", kF32, {}, {0.3})}, {}, {kF32}, 2);
  };
  // Targets drawn inside [0, C); ignore_index 1 hits some of them.
  m["NegativeLogLikelihoodLoss"] =
      m["SoftmaxCrossEntropyLoss"] = [](const OpSchema& s, std::vector<Case>& out) {
        data_op(s, out, "mean", {3, 5, 2}, {in("t", kI64, {3, 2}, V::ints(0, 4))}, {}, {kF32, kF64},
                s.max_outputs);
        data_op(s, out, "none-weight-ii", {4, 3},
                {in("t", kI32, {4}, V::ints(0, 2)), cst("w", kF32, {3}, V::uniform(0.5, 2))},
                {{"reduction", "none"}, {"ignore_index", i(1)}}, {kF32}, s.max_outputs);
        data_op(s, out, "sum-symbolic", {N, 4, 3}, {in("t", kI64, {N, 3}, V::ints(0, 3))},
                {{"reduction", "sum"}});
      };
  m["EyeLike"] = [](const OpSchema& s, std::vector<Case>& out) {
    data_op(s, out, "square", {4, 4}, {}, {}, {kF32, kI64});
    data_op(s, out, "k1-dtype", {3, 5}, {}, {{"k", i(1)}, {"dtype", i(dtype_to_onnx(kI32))}});
  };
  m["Det"] = [](const OpSchema& s, std::vector<Case>& out) {
    data_op(s, out, "3x3", {3, 3}, {});
    data_op(s, out, "batched", {2, 4, 4}, {}, {}, {kF32, kF64});
  };
  m["Range"] = [](const OpSchema& s, std::vector<Case>& out) {
    // Run-time bounds: the output length depends on the values.
    out.push_back(
        single(s.name, "f32",
               {in("start", kF32, {}, V::exactly({1.5})), in("limit", kF32, {}, V::exactly({9})),
                in("delta", kF32, {}, V::exactly({1.25}))}));
    out.push_back(
        single(s.name, "i64-negative",
               {in("start", kI64, {}, V::exactly({10})), in("limit", kI64, {}, V::exactly({-3})),
                in("delta", kI64, {}, V::exactly({-3}))}));
  };
  m["ConstantOfShape"] = [](const OpSchema& s, std::vector<Case>& out) {
    // Shape of a run-time tensor, as exporters emit it.
    for (DType t : {kF32, kI64}) {
      Case c;
      c.group = s.name;
      c.name = s.name + "/" + dtype_tag(t) + "-from-shape";
      c.tensors = {in("x", kF32, {N, 3})};
      c.nodes = {{"Shape", {"x"}, {"shape"}, {}},
                 {"ConstantOfShape",
                  {"shape"},
                  {"y"},
                  {{"value", Attribute(generate_tensor(t, {1}, V::exactly({2.5}), 0))}}}};
      c.outputs = {"y"};
      out.push_back(with_runs(std::move(c), {2, 5}));
    }
  };
  m["Constant"] = [](const OpSchema& s, std::vector<Case>& out) {
    Case c;
    c.group = s.name;
    c.name = s.name + "/added";
    c.tensors = {in("x", kF32, {2, 3})};
    c.nodes = {{"Constant", {}, {"k"}, {{"value_floats", Attribute(std::vector<float>{1, -2, 3})}}},
               {"Add", {"x", "k"}, {"y"}, {}}};
    c.outputs = {"y"};
    out.push_back(c);
    // A graph output that is a constant: the device returns it without computing anything.
    c.name = s.name + "/as-output";
    c.nodes.push_back({"Constant", {}, {"k2"}, {{"value_int", Attribute(int64_t{7})}}});
    c.outputs = {"y", "k2"};
    out.push_back(std::move(c));
  };
}

void norm_ops(std::map<std::string, CaseFn>& m) {
  m["InstanceNormalization"] = [](const OpSchema& s, std::vector<Case>& out) {
    data_op(
        s, out, "nchw", {2, 3, 4, 5},
        {cst("scale", kF32, {3}, V::uniform(0.5, 1.5)), cst("bias", kF32, {3}, V::uniform(-1, 1))});
    data_op(
        s, out, "symbolic", {N, 2, 6},
        {cst("scale", kF32, {2}, V::uniform(0.5, 1.5)), cst("bias", kF32, {2}, V::uniform(-1, 1))});
  };
  m["GroupNormalization"] = [](const OpSchema& s, std::vector<Case>& out) {
    data_op(
        s, out, "per-channel", {2, 4, 3, 3},
        {cst("scale", kF32, {4}, V::uniform(0.5, 1.5)), cst("bias", kF32, {4}, V::uniform(-1, 1))},
        {{"num_groups", i(2)}});
    data_op(
        s, out, "groups-eq-channels", {1, 3, 5},
        {cst("scale", kF32, {3}, V::uniform(0.5, 1.5)), cst("bias", kF32, {3}, V::uniform(-1, 1))},
        {{"num_groups", i(3)}});
    // Opset 18 takes scale and bias per group.
    Case c = single(s.name, "opset18-per-group",
                    {in("x", kF32, {2, 4, 3}), cst("scale", kF32, {2}, V::uniform(0.5, 1.5)),
                     cst("bias", kF32, {2}, V::uniform(-1, 1))},
                    {{"num_groups", i(2)}});
    c.opset = 18;
    out.push_back(std::move(c));
  };
  m["LpNormalization"] = [](const OpSchema& s, std::vector<Case>& out) {
    data_op(s, out, "p2-last", {3, 5}, {});
    data_op(s, out, "p1-axis0", {3, 5}, {}, {{"p", i(1)}, {"axis", i(0)}});
  };
  m["MeanVarianceNormalization"] = [](const OpSchema& s, std::vector<Case>& out) {
    data_op(s, out, "default-axes", {2, 3, 4, 5}, {});
    data_op(s, out, "last-axis", {3, 8}, {}, {{"axes", I({1})}});
  };
  m["LRN"] = [](const OpSchema& s, std::vector<Case>& out) {
    data_op(s, out, "size3", {1, 5, 3, 3}, {}, {{"size", i(3)}});
    data_op(s, out, "size2-params", {2, 4, 2, 2}, {},
            {{"size", i(2)}, {"alpha", 0.01f}, {"beta", 0.5f}, {"bias", 2.0f}});
  };
  m["MaxUnpool"] = [](const OpSchema& s, std::vector<Case>& out) {
    // Valid indices come from MaxPool, as in the models that use MaxUnpool.
    Case c;
    c.group = s.name;
    c.name = s.name + "/from-maxpool";
    c.tensors = {in("x", kF32, {1, 2, 4, 4})};
    Attrs k = {{"kernel_shape", I({2, 2})}, {"strides", I({2, 2})}};
    c.nodes = {{"MaxPool", {"x"}, {"p", "idx"}, k}, {"MaxUnpool", {"p", "idx"}, {"y"}, k}};
    c.outputs = {"y"};
    out.push_back(std::move(c));
  };
  m["DeformConv"] = [](const OpSchema& s, std::vector<Case>& out) {
    out.push_back(
        single(s.name, "offsets",
               {in("x", kF32, {1, 2, 5, 5}), cst("w", kF32, {3, 2, 3, 3}, V::uniform(-1, 1)),
                in("offset", kF32, {1, 18, 3, 3}, V::uniform(-1.5, 1.5)),
                cst("b", kF32, {3}, V::uniform(-1, 1))}));
    out.push_back(
        single(s.name, "mask-pads",
               {in("x", kF32, {1, 2, 4, 4}), cst("w", kF32, {2, 2, 2, 2}, V::uniform(-1, 1)),
                in("offset", kF32, {1, 8, 5, 5}, V::uniform(-1, 1)), omitted(),
                in("mask", kF32, {1, 4, 5, 5}, V::uniform(0, 1))},
               {{"pads", I({1, 1, 1, 1})}}));
  };
}

void resize_ops(std::map<std::string, CaseFn>& m) {
  m["Resize"] = [](const OpSchema& s, std::vector<Case>& out) {
    auto scales = [](std::vector<double> v) {
      return cst("scales", kF32, {static_cast<int64_t>(v.size())}, v);
    };
    data_op(s, out, "nearest-x2", {1, 2, 3, 4}, {omitted(), scales({1, 1, 2, 2})}, {},
            {kF32, kI64});
    data_op(s, out, "linear-half-pixel", {1, 2, 4, 4}, {omitted(), scales({1, 1, 1.5, 0.75})},
            {{"mode", "linear"}});
    data_op(s, out, "linear-align-corners-sizes", {1, 1, 3, 5},
            {omitted(), omitted(), ints("sizes", {1, 1, 5, 4})},
            {{"mode", "linear"}, {"coordinate_transformation_mode", "align_corners"}});
    data_op(s, out, "linear-pytorch-half-pixel", {1, 2, 4, 4},
            {omitted(), omitted(), ints("sizes", {1, 2, 1, 7})},
            {{"mode", "linear"}, {"coordinate_transformation_mode", "pytorch_half_pixel"}});
    data_op(s, out, "nearest-round-prefer-ceil", {1, 1, 3, 3},
            {omitted(), scales({1, 1, 2.5, 1.5})}, {{"nearest_mode", "round_prefer_ceil"}});
    data_op(s, out, "cubic", {1, 1, 4, 4}, {omitted(), scales({1, 1, 2, 2})}, {{"mode", "cubic"}});
    data_op(s, out, "nearest-asymmetric-floor", {1, 2, 5, 5}, {omitted(), scales({1, 1, 0.6, 1.4})},
            {{"coordinate_transformation_mode", "asymmetric"}, {"nearest_mode", "floor"}});
  };
}

// Signal, sampling and integer-convolution ops (the ONNX-completeness additions, continued in
// completeness_ops_2): inputs that are sizes, axes or indices are constants inside their valid
// ranges.
void completeness_ops(std::map<std::string, CaseFn>& m) {
  m["HannWindow"] = m["HammingWindow"] =
      m["BlackmanWindow"] = [](const OpSchema& s, std::vector<Case>& out) {
        out.push_back(single(s.name, "periodic", {ints("size", {10}, true)}));
        out.push_back(single(s.name, "symmetric-f64", {ints("size", {7}, true)},
                             {{"periodic", i(0)}, {"output_datatype", i(11)}}));
      };
  m["DFT"] = [](const OpSchema& s, std::vector<Case>& out) {
    out.push_back(
        single(s.name, "real", {in("x", kF32, {2, 8, 1}), omitted(), ints("axis", {1}, true)}));
    out.push_back(single(s.name, "complex-inverse",
                         {in("x", kF32, {2, 6, 2}), omitted(), ints("axis", {1}, true)},
                         {{"inverse", i(1)}}));
    out.push_back(
        single(s.name, "onesided-padded",
               {in("x", kF32, {1, 8, 3, 1}), ints("n", {10}, true), ints("axis", {-3}, true)},
               {{"onesided", i(1)}}));
  };
  m["STFT"] = [](const OpSchema& s, std::vector<Case>& out) {
    out.push_back(single(s.name, "window",
                         {in("x", kF32, {2, 32, 1}), ints("step", {4}, true),
                          cst("w", kF32, {8}, V::uniform(0, 1))}));
    out.push_back(single(
        s.name, "two-sided-length",
        {in("x", kF32, {1, 20, 2}), ints("step", {3}, true), omitted(), ints("len", {6}, true)},
        {{"onesided", i(0)}}));
  };
  m["TfIdfVectorizer"] = [](const OpSchema& s, std::vector<Case>& out) {
    Attrs a = {{"min_gram_length", i(1)},
               {"max_gram_length", i(2)},
               {"max_skip_count", i(2)},
               {"mode", "TFIDF"},
               {"ngram_counts", I({0, 3})},
               {"ngram_indexes", I({0, 1, 2, 3, 4})},
               {"pool_int64s", I({1, 2, 3, 1, 2, 2, 3})},
               {"weights", Attribute(std::vector<float>{0.5f, 1, 2, 1.5f, 3})}};
    out.push_back(single(s.name, "batch", {in("x", kI64, {2, 7}, V::ints(0, 4))}, a));
  };
  m["ConvInteger"] = [](const OpSchema& s, std::vector<Case>& out) {
    out.push_back(single(
        s.name, "u8-padded",
        {in("x", kU8, {1, 2, 5, 5}, V::ints(0, 255)), cst("w", kU8, {3, 2, 3, 3}, V::ints(0, 255)),
         cst("xz", kU8, {}, {128}), cst("wz", kU8, {}, {100})},
        {{"pads", I({1, 1, 1, 1})}}));
  };
  m["QLinearConv"] = [](const OpSchema& s, std::vector<Case>& out) {
    out.push_back(single(s.name, "u8-bias",
                         {in("x", kU8, {1, 2, 4, 4}, V::ints(0, 255)), cst("xs", kF32, {}, {0.02}),
                          cst("xz", kU8, {}, {128}), cst("w", kU8, {3, 2, 2, 2}, V::ints(0, 255)),
                          cst("ws", kF32, {3}, {0.01, 0.02, 0.03}), cst("wz", kU8, {}, {120}),
                          cst("ys", kF32, {}, {0.5}), cst("yz", kU8, {}, {100}),
                          cst("b", kI32, {3}, {-50, 0, 70})}));
  };
  m["GridSample"] = [](const OpSchema& s, std::vector<Case>& out) {
    auto g = V::uniform(-1.2, 1.2);
    out.push_back(single(s.name, "linear-zeros",
                         {in("x", kF32, {1, 2, 4, 5}), in("g", kF32, {1, 3, 3, 2}, g)},
                         {{"mode", "linear"}}));
    out.push_back(single(s.name, "nearest-border",
                         {in("x", kF32, {2, 1, 3, 4}), in("g", kF32, {2, 2, 5, 2}, g)},
                         {{"mode", "nearest"}, {"padding_mode", "border"}}));
    out.push_back(
        single(s.name, "cubic-reflection-aligned",
               {in("x", kF32, {1, 1, 4, 4}), in("g", kF32, {1, 3, 2, 2}, g)},
               {{"mode", "cubic"}, {"padding_mode", "reflection"}, {"align_corners", i(1)}}));
    out.push_back(single(s.name, "volumetric",
                         {in("x", kF32, {1, 1, 3, 4, 5}), in("g", kF32, {1, 2, 2, 2, 3}, g)},
                         {{"mode", "linear"}}));
  };
  m["AffineGrid"] = [](const OpSchema& s, std::vector<Case>& out) {
    out.push_back(single(s.name, "2d", {in("theta", kF32, {2, 2, 3}), ints("size", {2, 1, 4, 5})}));
    out.push_back(single(s.name, "3d-aligned",
                         {in("theta", kF32, {1, 3, 4}), ints("size", {1, 1, 2, 3, 4})},
                         {{"align_corners", i(1)}}));
  };
}

// Quantization, detection, selection and recurrent ops (the ONNX-completeness additions).
void completeness_ops_2(std::map<std::string, CaseFn>& m) {
  m["QuantizeLinear"] = [](const OpSchema& s, std::vector<Case>& out) {
    out.push_back(
        single(s.name, "u8",
               {in("x", kF32, {3, 4}), cst("s", kF32, {}, {0.05}), cst("zp", kU8, {}, {128})}));
    out.push_back(single(s.name, "i8-axis",
                         {in("x", kF32, {2, 3, 4}), cst("s", kF32, {3}, V::uniform(0.01, 0.1)),
                          cst("zp", DType::kI8, {3}, {-3, 0, 5})}));
    out.push_back(single(s.name, "blocked",
                         {in("x", kF32, {3, 4}), cst("s", kF32, {3, 2}, V::uniform(0.01, 0.1)),
                          cst("zp", kU8, {3, 2}, V::ints(100, 150))},
                         {{"axis", i(1)}, {"block_size", i(2)}}));
  };
  m["DequantizeLinear"] = [](const OpSchema& s, std::vector<Case>& out) {
    out.push_back(single(s.name, "u8",
                         {in("x", kU8, {3, 4}, V::ints(0, 255)), cst("s", kF32, {}, {0.05}),
                          cst("zp", kU8, {}, {128})}));
    out.push_back(
        single(s.name, "i8-axis",
               {in("x", DType::kI8, {2, 3, 4}), cst("s", kF32, {3}, V::uniform(0.01, 0.1)),
                cst("zp", DType::kI8, {3}, {-3, 0, 5})}));
  };
  m["DynamicQuantizeLinear"] = [](const OpSchema& s, std::vector<Case>& out) {
    out.push_back(single(s.name, "x", {in("x", kF32, {3, 4})}, {}, 3));
  };
  m["QLinearMatMul"] = [](const OpSchema& s, std::vector<Case>& out) {
    out.push_back(single(s.name, "u8-batched",
                         {in("a", kU8, {2, 3, 4}, V::ints(100, 140)), cst("as", kF32, {}, {0.02}),
                          cst("az", kU8, {}, {120}), in("b", kU8, {4, 5}, V::ints(110, 150)),
                          cst("bs", kF32, {}, {0.03}), cst("bz", kU8, {}, {128}),
                          cst("ys", kF32, {}, {0.01}), cst("yz", kU8, {}, {100})}));
  };
  m["MatMulInteger"] = [](const OpSchema& s, std::vector<Case>& out) {
    out.push_back(
        single(s.name, "u8",
               {in("a", kU8, {3, 4}, V::ints(0, 255)), in("b", kU8, {4, 2}, V::ints(0, 255)),
                cst("az", kU8, {}, {12}), cst("bz", kU8, {}, {7})}));
  };
  m["NonMaxSuppression"] = [](const OpSchema& s, std::vector<Case>& out) {
    out.push_back(single(s.name, "two-classes",
                         {in("boxes", kF32, {1, 6, 4}, V::uniform(0, 1)),
                          in("scores", kF32, {1, 2, 6}, V::uniform(0, 1)), ints("max", {3}),
                          cst("iou", kF32, {1}, {0.3}), cst("score", kF32, {1}, {0.2})}));
  };
  m["RoiAlign"] = [](const OpSchema& s, std::vector<Case>& out) {
    auto rois = V::exactly({0, 0, 5, 5, 1.5, 2.5, 7, 6, 4, 1, 9.5, 9});
    out.push_back(single(
        s.name, "avg",
        {in("x", kF32, {2, 2, 10, 10}), cst("rois", kF32, {3, 4}, rois), ints("idx", {0, 1, 1})},
        {{"output_height", i(3)}, {"output_width", i(4)}, {"sampling_ratio", i(2)}}));
    out.push_back(single(
        s.name, "max-adaptive",
        {in("x", kF32, {1, 1, 10, 10}), cst("rois", kF32, {3, 4}, rois), ints("idx", {0, 0, 0})},
        {{"mode", "max"},
         {"coordinate_transformation_mode", "output_half_pixel"},
         {"output_height", i(2)},
         {"output_width", i(2)}}));
  };
  m["ReverseSequence"] = [](const OpSchema& s, std::vector<Case>& out) {
    data_op(s, out, "time-major", {5, 3, 2}, {ints("lens", {5, 2, 0})}, {}, {kF32, kI64});
    data_op(s, out, "batch-major", {3, 4}, {ints("lens", {1, 4, 2})},
            {{"batch_axis", i(0)}, {"time_axis", i(1)}});
  };
  m["Compress"] = [](const OpSchema& s, std::vector<Case>& out) {
    data_op(s, out, "axis1", {3, 4}, {cst("c", kBool, {3}, {1, 0, 1})}, {{"axis", i(1)}},
            {kF32, kI64});
    data_op(s, out, "flat", {3, 4}, {cst("c", kBool, {5}, {0, 1, 1, 0, 1})});
  };
  m["Unique"] = [](const OpSchema& s, std::vector<Case>& out) {
    data_op(s, out, "flat-unsorted", {4, 3}, {}, {{"sorted", i(0)}}, {kI64}, 4);
    out.push_back(
        single(s.name, "rows", {in("x", kF32, {4, 2}, V::ints(0, 1))}, {{"axis", i(0)}}, 4));
  };
  m["Col2Im"] = [](const OpSchema& s, std::vector<Case>& out) {
    out.push_back(
        single(s.name, "2d", {in("x", kF32, {1, 8, 9}), ints("img", {4, 4}), ints("blk", {2, 2})}));
    out.push_back(single(s.name, "strided-padded",
                         {in("x", kF32, {2, 4, 9}), ints("img", {5, 5}), ints("blk", {2, 2})},
                         {{"strides", I({2, 2})}, {"pads", I({1, 1, 1, 1})}}));
  };
  const std::string ml = "ai.onnx.ml", training = "ai.onnx.preview.training";
  m[ml + ".Binarizer"] = [ml](const OpSchema& s, std::vector<Case>& out) {
    out.push_back(
        single(s.name, "f32", {in("x", kF32, {3, 4})}, {{"threshold", Attribute(0.5f)}}, 1, ml));
    out.push_back(single(s.name, "i64", {in("x", kI64, {5})}, {}, 1, ml));
  };
  m[ml + ".ArrayFeatureExtractor"] = [ml](const OpSchema& s, std::vector<Case>& out) {
    out.push_back(single(s.name, "f32", {in("x", kF32, {3, 5}), ints("i", {4, 0, 2})}, {}, 1, ml));
    out.push_back(single(s.name, "i64-1d", {in("x", kI64, {6}), ints("i", {5, 5})}, {}, 1, ml));
  };
  // Two tensors of different shapes per optimizer; states are non-negative where they are sums
  // of squares.
  auto step_inputs = [](int states) {
    std::vector<TensorSpec> v = {cst("r", kF32, {}, {0.1}), ints("t", {3}, true),
                                 in("x1", kF32, {3}),       in("x2", kF32, {2, 2}),
                                 in("g1", kF32, {3}),       in("g2", kF32, {2, 2})};
    for (int k = 0; k < states; ++k) {
      v.push_back(in("s" + std::to_string(k) + "a", kF32, {3}, V::uniform(0, 1)));
      v.push_back(in("s" + std::to_string(k) + "b", kF32, {2, 2}, V::uniform(0, 1)));
    }
    return v;
  };
  m[training + ".Adagrad"] = [=](const OpSchema& s, std::vector<Case>& out) {
    out.push_back(single(s.name, "two", step_inputs(1),
                         {{"epsilon", Attribute(1e-5f)}, {"decay_factor", Attribute(0.1f)}}, 4,
                         training));
  };
  m[training + ".Momentum"] = [=](const OpSchema& s, std::vector<Case>& out) {
    for (const char* mode : {"standard", "nesterov"})
      out.push_back(single(s.name, mode, step_inputs(1),
                           {{"alpha", Attribute(0.9f)},
                            {"beta", Attribute(0.1f)},
                            {"mode", mode},
                            {"norm_coefficient", Attribute(0.01f)}},
                           4, training));
  };
  m[training + ".Adam"] = [=](const OpSchema& s, std::vector<Case>& out) {
    out.push_back(
        single(s.name, "two", step_inputs(2), {{"epsilon", Attribute(1e-6f)}}, 6, training));
  };
  m["RNN"] = m["GRU"] = m["LSTM"] = [](const OpSchema& s, std::vector<Case>& out) {
    const int64_t g = s.name == "RNN" ? 1 : s.name == "GRU" ? 3 : 4;
    const int outs = s.name == "LSTM" ? 3 : 2;
    auto w = V::uniform(-0.5, 0.5);
    out.push_back(single(s.name, "forward",
                         {in("x", kF32, {3, 2, 4}), cst("w", kF32, {1, g * 5, 4}, w),
                          cst("r", kF32, {1, g * 5, 5}, w), cst("b", kF32, {1, 2 * g * 5}, w)},
                         {{"hidden_size", i(5)}}, outs));
    out.push_back(single(s.name, "bidirectional-batch-major",
                         {in("x", kF32, {2, 3, 4}), cst("w", kF32, {2, g * 5, 4}, w),
                          cst("r", kF32, {2, g * 5, 5}, w)},
                         {{"hidden_size", i(5)}, {"direction", "bidirectional"}, {"layout", i(1)}},
                         outs));
  };
}

}  // namespace

void register_more_overrides(std::map<std::string, CaseFn>& m) {
  shape_ops(m);
  indexing_ops(m);
  misc_ops(m);
  norm_ops(m);
  resize_ops(m);
  fused_op_overrides(m);
  completeness_ops(m);
  completeness_ops_2(m);
}

}  // namespace ferrite::cts
