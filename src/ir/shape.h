// Tensor types: dtype plus a shape whose dims are integers, symbolic expressions or unknown.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "ir/dtype.h"
#include "ir/sym_expr.h"
#include "ir/value_kind.h"

namespace ferrite {

// One dimension: a (possibly symbolic) expression, or unknown ("?") when inference cannot say.
class Dim {
 public:
  Dim() = default;  // unknown
  Dim(int64_t v) : known_(true), expr_(v) {}  // NOLINT
  Dim(SymExpr e) : known_(true), expr_(std::move(e)) {}  // NOLINT
  static Dim unknown() { return Dim(); }
  static Dim symbol(const std::string& name) { return Dim(SymExpr::symbol(name)); }

  bool is_known() const { return known_; }
  bool is_static() const { return known_ && expr_.is_constant(); }
  std::optional<int64_t> value() const { return known_ ? expr_.constant() : std::nullopt; }
  const SymExpr& expr() const { return expr_; }
  bool operator==(const Dim& o) const { return known_ == o.known_ && (!known_ || expr_ == o.expr_); }
  bool operator!=(const Dim& o) const { return !(*this == o); }
  std::string to_string() const { return known_ ? expr_.to_string() : "?"; }

  // Arithmetic that propagates unknown.
  Dim operator+(const Dim& o) const { return known_ && o.known_ ? Dim(expr_ + o.expr_) : Dim(); }
  Dim operator-(const Dim& o) const { return known_ && o.known_ ? Dim(expr_ - o.expr_) : Dim(); }
  Dim operator*(const Dim& o) const { return known_ && o.known_ ? Dim(expr_ * o.expr_) : Dim(); }
  Dim floordiv(const Dim& o) const {
    if (!known_ || !o.known_ || o.value() == 0) return Dim();
    return bounded(expr_.floordiv(o.expr_));
  }
  Dim ceildiv(const Dim& o) const {
    if (!known_ || !o.known_ || o.value() == 0) return Dim();
    return bounded(expr_.ceildiv(o.expr_));
  }

  // Division nests expressions (a chain of strided convolutions nests one level per layer).
  // Past this size a dim becomes unknown instead, so that hostile or absurdly deep models cannot
  // make inference quadratic; run-time shapes still come out exact.
  static constexpr size_t kMaxExprChars = 512;
  static Dim bounded(SymExpr e) {
    if (e.is_constant()) return Dim(std::move(e));
    return e.to_string().size() > kMaxExprChars ? Dim() : Dim(std::move(e));
  }

 private:
  bool known_ = false;
  SymExpr expr_;
};

// A shape with known rank (dims may be unknown), or an unknown rank.
class Shape {
 public:
  Shape() = default;  // unknown rank
  explicit Shape(std::vector<Dim> dims) : rank_known_(true), dims_(std::move(dims)) {}
  static Shape of(const std::vector<int64_t>& dims);
  static Shape unknown_rank() { return Shape(); }
  static Shape scalar() { return Shape(std::vector<Dim>{}); }

  bool rank_known() const { return rank_known_; }
  size_t rank() const { return dims_.size(); }
  const std::vector<Dim>& dims() const { return dims_; }
  std::vector<Dim>& dims() { return dims_; }
  const Dim& operator[](size_t i) const { return dims_[i]; }
  bool is_static() const;
  std::optional<std::vector<int64_t>> static_dims() const;
  Dim numel() const;
  bool operator==(const Shape& o) const {
    return rank_known_ == o.rank_known_ && dims_ == o.dims_;
  }
  std::string to_string() const;  // "[batch,512]", "[?]", "[*]" for unknown rank

 private:
  bool rank_known_ = false;
  std::vector<Dim> dims_;
};

// The type of a value: a tensor's dtype and shape, or (kind != kTensor) those of the tensors a
// sequence or optional holds (ir/value_kind.h).
struct TensorType {
  DType dtype = DType::kUndefined;
  Shape shape;
  ValueKind kind = ValueKind::kTensor;
  bool is_tensor() const { return kind == ValueKind::kTensor; }
  std::string to_string() const;  // "f32[batch,512]", "seq(f32[?,3])", "optional(seq(i64[*]))"
  bool operator==(const TensorType& o) const {
    return dtype == o.dtype && shape == o.shape && kind == o.kind;
  }
};

// The type both `a` and `b` satisfy: dims that differ become unknown, ranks that differ make the
// rank unknown. The dtype and kind are a's (callers check that they agree).
TensorType merge_types(const TensorType& a, const TensorType& b);

// NumPy multidirectional broadcasting of symbolic shapes; error text on a definite mismatch.
// Broadcasting a symbolic dim `e` against a static dim c != 1 yields c, which is only right when
// e is 1 or c at run time: that assumption is reported to the active ShapeAssumptionScope.
std::optional<Shape> broadcast_shapes(const Shape& a, const Shape& b, std::string* error);

// A fact shape inference assumed instead of proving: `expr` is 1 or `value` at run time.
struct ShapeAssumption {
  SymExpr expr;
  int64_t value = 0;
  std::string where;  // the scope's label at the time (e.g. the node being inferred)
};

// Collects the assumptions made on this thread while it lives (scopes nest; the innermost one
// collects). A Session opens one while it infers and compiles, and checks them per call.
class ShapeAssumptionScope {
 public:
  explicit ShapeAssumptionScope(std::vector<ShapeAssumption>* sink);
  ~ShapeAssumptionScope();
  ShapeAssumptionScope(const ShapeAssumptionScope&) = delete;
  ShapeAssumptionScope& operator=(const ShapeAssumptionScope&) = delete;
  // Label attached to the assumptions recorded from now on.
  static void set_label(std::string label);

 private:
  std::vector<ShapeAssumption>* prev_;
  std::string prev_label_;
};

}  // namespace ferrite
