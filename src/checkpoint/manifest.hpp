// manifest.json of a checkpoint directory: written last by a commit, read to
// decide whether a directory holds a complete checkpoint. The reader treats
// the text as untrusted (a damaged or hand-edited file).
#pragma once

#include <cstdint>
#include <string_view>

#include "accelerate/checkpoint/checkpoint_directory.hpp"
#include "detail/json.hpp"

namespace accelerate::checkpoint::detail {
using accelerate::detail::Json;

/// Largest manifest.json accepted (a real one lists one file per node).
inline constexpr std::uint64_t kMaxManifestBytes = 16U << 20;

/// The JSON a commit writes for `manifest` (with "complete": true).
Json manifest_json(const Manifest& manifest);

/// The manifest in `text` (the contents of `source`). Throws ConfigError
/// naming `source` and the field when the text is not JSON, another format,
/// not marked complete, lacks a field or has one of the wrong type, or lists
/// no file or a file name that is not a plain name inside the directory.
/// File sizes on disk are the caller's to check.
Manifest parse_manifest(std::string_view text, std::string_view source);

}  // namespace accelerate::checkpoint::detail
