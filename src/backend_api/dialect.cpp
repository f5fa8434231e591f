#include "backend_api/dialect.h"

namespace ferrite {

bool CodegenDialect::supports(DType dtype) const {
  ScalarSpelling s = spelling();
  if (s.scalar_type) return s.scalar_type(dtype).has_value();
  return dtype == DType::kF32 || dtype == DType::kF64 || dtype == DType::kI32 ||
         dtype == DType::kI64 || dtype == DType::kBool;
}

}  // namespace ferrite
