// Objects as bytes for the object collectives: c10::IValue trees (lists,
// tuples, string-keyed dicts, strings, numbers, bools, tensors) through
// LibTorch's own pickler, the format torch.save uses for its data part. The
// bytes always travel over MPI; tensors keep their device in the pickle, so
// send CPU tensors unless every receiver has the same device.
#pragma once

#include <ATen/core/ivalue.h>

#include <vector>

namespace accelerate::detail {

std::vector<char> serialize_object(const c10::IValue& object);
c10::IValue deserialize_object(const std::vector<char>& bytes);

}  // namespace accelerate::detail
