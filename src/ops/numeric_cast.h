// Conversions from a double result to a storage type that never invoke undefined behaviour:
// reference kernels that compute in double (means, interpolation, norms) write integer outputs
// through these, so NaN or out-of-range values cannot trip a float-to-int cast.
#pragma once

#include <cmath>
#include <limits>
#include <type_traits>

#include "ir/dtype.h"

namespace ferrite {

// Floats round to nearest; integers truncate toward zero (like NumPy's astype) and saturate; NaN
// becomes 0; bool is "nonzero".
template <class T>
T saturate_cast(double v) {
  if constexpr (is_float_v<T>) {
    return convert<T>(v);
  } else if constexpr (std::is_same_v<T, bool>) {
    return v != 0;
  } else {
    if (std::isnan(v)) return T(0);
    constexpr double lo = static_cast<double>(std::numeric_limits<T>::lowest());
    constexpr double hi = static_cast<double>(std::numeric_limits<T>::max());
    if (v <= lo) return std::numeric_limits<T>::lowest();
    // hi may round up to 2^N for 64-bit types, so compare with >= and return max.
    if (v >= hi) return std::numeric_limits<T>::max();
    return static_cast<T>(v);
  }
}

// Reads a storage value as double (exact for every float type and for integers up to 2^53).
template <class T>
double to_double(T v) {
  if constexpr (std::is_same_v<T, bool>) {
    return v ? 1.0 : 0.0;
  } else {
    return convert<double>(v);
  }
}

}  // namespace ferrite
