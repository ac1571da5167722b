#include "comm/object_serialization.hpp"

#include <torch/serialize.h>

#include "accelerate/error.hpp"

namespace accelerate::detail {

std::vector<char> serialize_object(const c10::IValue& object) {
  try {
    return torch::pickle_save(object);
  } catch (const c10::Error& error) {
    throw ConfigError("object collective: cannot serialise a value of type " + object.tagKind() + " (" +
                      error.what_without_backtrace() +
                      "). Objects may nest lists, tuples, string-keyed dicts, strings, numbers, bools and tensors.");
  }
}

c10::IValue deserialize_object(const std::vector<char>& bytes) {
  try {
    return torch::pickle_load(bytes);
  } catch (const c10::Error& error) {
    throw Error("object collective: received " + std::to_string(bytes.size()) + " bytes that do not unpickle (" +
                error.what_without_backtrace() + "). All ranks must run the same build of the program.");
  }
}

}  // namespace accelerate::detail
