// Small helpers for writing CTS cases (op_cases.cpp, op_overrides.cpp, fusion_cases.cpp).
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "cts/cts.h"
#include "ops/op_schema.h"

namespace ferrite::cts {

using Attrs = std::map<std::string, Attribute>;

constexpr DType kF32 = DType::kF32, kF16 = DType::kF16, kF64 = DType::kF64, kBF16 = DType::kBF16,
                kI32 = DType::kI32, kI64 = DType::kI64, kBool = DType::kBool, kU8 = DType::kU8,
                kU32 = DType::kU32;

// Values that suit a dtype when nothing else is asked for.
ValueGen default_gen(DType t);

// A graph input.
TensorSpec in(std::string name, DType t, std::vector<DimSpec> dims);
TensorSpec in(std::string name, DType t, std::vector<DimSpec> dims, ValueGen g);
// A constant (initializer) with generated or exact values.
TensorSpec cst(std::string name, DType t, std::vector<int64_t> dims, ValueGen g);
TensorSpec cst(std::string name, DType t, std::vector<int64_t> dims, std::vector<double> values);
// A 1-D int64 constant (axes, shapes, pads...), or a 0-d one when `scalar`.
TensorSpec ints(std::string name, std::vector<int64_t> values, bool scalar = false);
// Marks an omitted optional input in single().
TensorSpec omitted();

// A case of one node over `inputs` (in order, omitted() for skipped optional inputs) with
// `num_outputs` outputs y0, y1, ...
Case single(const std::string& op, const std::string& variant, std::vector<TensorSpec> inputs,
            Attrs attrs = {}, int num_outputs = 1, const std::string& domain = "");

// The dtypes a generic case tries among those `allowed`: f32, f16, f64, i32, i64, bool (then the
// first of u8/u32/i8 when none of those is allowed).
std::vector<DType> pick_dtypes(DTypeSet allowed);
// The allowed dtypes of input `i` of a schema (all dtypes when unconstrained).
DTypeSet input_types(const OpSchema& s, int i);
std::string dtype_tag(DType t);

// NaN, +-inf, +-0, small and large values; `cycle` rotates the list (for a second operand).
ValueGen special_values(size_t cycle = 0);

// Generic families.
struct UnaryOpts {
  ValueGen float_gen = ValueGen::uniform(-2, 2);
  std::vector<std::pair<std::string, Attrs>> attr_variants;  // extra cases (f32)
};
void unary_cases(const OpSchema& s, const UnaryOpts& o, std::vector<Case>& out);
struct BinaryOpts {
  ValueGen a_float = ValueGen::uniform(-2, 2), b_float = ValueGen::uniform(-2, 2);
  std::optional<ValueGen> a_int, b_int;  // integer dtypes (default: default_gen)
  Attrs attrs;
  std::vector<DType> dtypes;  // empty: picked from the schema
};
void binary_cases(const OpSchema& s, const BinaryOpts& o, std::vector<Case>& out);

using CaseFn = std::function<void(const OpSchema&, std::vector<Case>&)>;
// The data-movement, indexing, normalization and internal-op half of the table
// (op_overrides_data.cpp).
void register_more_overrides(std::map<std::string, CaseFn>& m);
// The internal ferrite.* ops' cases (fused_op_cases.cpp).
void fused_op_overrides(std::map<std::string, CaseFn>& m);
// A copy of `c` run once per symbol size N in `sizes`.
Case with_runs(Case c, std::vector<int64_t> sizes);

// The per-op table (op_overrides.cpp): cases for ops that generic generation cannot handle or
// that need special inputs. Returns false when the op has no entry.
bool override_cases(const OpSchema& s, std::vector<Case>& out);

}  // namespace ferrite::cts
