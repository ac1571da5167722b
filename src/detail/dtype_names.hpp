// How each file format the library writes spells a torch dtype, from one
// table, so that a dtype is named alike in checkpoints, safetensors files,
// offload folders, the CLI and error messages.
#pragma once

#include <c10/core/ScalarType.h>

#include <optional>
#include <string_view>

namespace accelerate::detail {

/// A family of dtype names: which dtypes it holds and how it spells them.
enum class DtypeFormat {
  /// numpy's names of the ten real dtypes, "float32" … "bool" ("bfloat16",
  /// which numpy lacks, as torch spells it): the checkpoint's `dtype`
  /// attribute and the library's messages.
  checkpoint,
  /// The checkpoint's names plus numpy's "complex64" and "complex128":
  /// Accelerate's offload folders hold any numpy dtype.
  offload,
  /// safetensors' codes of the same ten real dtypes: "F32", "BF16", "BOOL" …
  safetensors,
};

/// `type` as `format` spells it; nullopt when the format does not hold it.
std::optional<std::string_view> dtype_name(c10::ScalarType type, DtypeFormat format);

/// The dtype `name` spells in `format`; nullopt for a name the format lacks
/// (names are case-sensitive, as the formats write them).
std::optional<c10::ScalarType> dtype_from_name(std::string_view name, DtypeFormat format);

/// For messages: the checkpoint's name ("float32"), else LibTorch's own
/// ("ComplexFloat"), so that any dtype can be named.
std::string_view describe_dtype(c10::ScalarType type);

}  // namespace accelerate::detail
