#include "training/power_sgd.hpp"

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <limits>
#include <system_error>
#include <utility>

#include "accelerate/comm/process_group.hpp"
#include "accelerate/format.hpp"

namespace accelerate::detail {
namespace {

bool parse_bool(const std::string& text, bool& value) {
  if (text == "true" || text == "True" || text == "1") {
    value = true;
    return true;
  }
  if (text == "false" || text == "False" || text == "0") {
    value = false;
    return true;
  }
  return false;
}

bool parse_integer(const std::string& text, int64_t minimum, int64_t& value) {
  int64_t parsed = 0;
  const char* last = text.data() + text.size();
  const auto [end, error] = std::from_chars(text.data(), last, parsed);
  if (error != std::errc{} || end != last || parsed < minimum) return false;
  value = parsed;
  return true;
}

bool parse_real(const std::string& text, double& value) {
  double parsed = 0;
  const char* last = text.data() + text.size();
  const auto [end, error] = std::from_chars(text.data(), last, parsed);
  if (error != std::errc{} || end != last || !(parsed >= 0) || !std::isfinite(parsed)) return false;
  value = parsed;
  return true;
}

// Gram-Schmidt over the columns of p (n × r), in place. A zero column stays
// zero (PyTorch's epsilon = 0 would divide by zero there).
void orthonormalise(const at::Tensor& p, double epsilon) {
  const int64_t r = p.size(1);
  for (int64_t i = 0; i < r; ++i) {
    at::Tensor column = p.narrow(1, i, 1);
    at::Tensor norm = column.norm();
    if (epsilon > 0) {
      norm.add_(epsilon);
    } else {
      norm.clamp_min_(std::numeric_limits<float>::min());
    }
    column.div_(norm);
    if (i + 1 < r) {
      at::Tensor rest = p.narrow(1, i + 1, r - i - 1);
      rest.sub_(column * (column * rest).sum(0, /*keepdim=*/true));
    }
  }
}

}  // namespace

std::string parse_power_sgd_options(const std::map<std::string, std::string>& entries, PowerSgdOptions& options) {
  for (const auto& [key, text] : entries) {
    bool ok = false;
    if (key == "matrix_approximation_rank") {
      ok = parse_integer(text, 1, options.matrix_approximation_rank);
    } else if (key == "start_powerSGD_iter") {
      ok = parse_integer(text, 0, options.start_powerSGD_iter);
    } else if (key == "min_compression_rate") {
      ok = parse_real(text, options.min_compression_rate);
    } else if (key == "use_error_feedback") {
      ok = parse_bool(text, options.use_error_feedback);
    } else if (key == "warm_start") {
      ok = parse_bool(text, options.warm_start);
    } else if (key == "orthogonalization_epsilon") {
      ok = parse_real(text, options.orthogonalization_epsilon);
    } else if (key == "random_seed") {
      int64_t seed = 0;
      ok = parse_integer(text, 0, seed);
      options.random_seed = static_cast<uint64_t>(seed);
    } else {
      return format(
          "comm_state_option has the key '{}', which PowerSGD does not know; the keys are matrix_approximation_rank, "
          "start_powerSGD_iter, min_compression_rate, use_error_feedback, warm_start, orthogonalization_epsilon and "
          "random_seed",
          key);
    }
    if (!ok) {
      return format(
          "comm_state_option '{}' is '{}', which is not valid; give an integer >= 1 for matrix_approximation_rank, an "
          "integer >= 0 for start_powerSGD_iter and random_seed, a finite number >= 0 for min_compression_rate and "
          "orthogonalization_epsilon, and true or false for use_error_feedback and warm_start",
          key, text);
    }
  }
  return {};
}

struct PowerSgdCompressor::Matrix {
  at::Tensor x;  // n × m: the gradient (or the padded bucket), in place
  at::Tensor p;  // n × r, a view of Bucket::p
  at::Tensor q;  // m × r, a view of Bucket::q
};

struct PowerSgdCompressor::Bucket {
  at::Tensor flat;                // the reducer's buffer
  at::Tensor working;             // flat, or (batched) its zero-padded square copy
  std::vector<at::Tensor> plain;  // gradients that travel uncompressed (views of flat)
  at::Tensor plain_flat;
  std::vector<Matrix> matrices;
  at::Tensor p, q;
  at::Tensor p_wire, q_wire, plain_wire;  // the messages in the wire dtype, when compressed for the wire
  at::Tensor error, input;                // error feedback: what the last step left out, and X
  std::unique_ptr<Work> p_work, plain_work;
  bool q_ready = false;
};

PowerSgdCompressor::PowerSgdCompressor(PowerSgdOptions options, const std::vector<at::Tensor>& buckets,
                                       const std::vector<std::vector<at::Tensor>>& views,
                                       std::optional<c10::ScalarType> wire, int world_size)
    : options_(options),
      wire_(wire),
      inverse_world_(1.0 / world_size),
      generator_(at::make_generator<at::CPUGeneratorImpl>(options.random_seed)) {
  const int64_t rank = options_.matrix_approximation_rank;
  for (std::size_t b = 0; b < buckets.size(); ++b) {
    auto bucket = std::make_unique<Bucket>();
    bucket->flat = buckets[b];
    const auto tensor_options = bucket->flat.options();
    // (rows, columns) of every matrix, and where its P and Q go.
    std::vector<std::pair<int64_t, int64_t>> shapes;
    std::vector<at::Tensor> sources;
    if (options_.batched) {
      const auto side = static_cast<int64_t>(std::ceil(std::sqrt(static_cast<double>(bucket->flat.numel()))));
      bucket->working = at::zeros({side * side}, tensor_options);
      shapes.emplace_back(side, side);
      sources.push_back(bucket->working.view({side, side}));
    } else {
      bucket->working = bucket->flat;
      int64_t plain_elements = 0;
      for (const auto& view : views[b]) {
        const int64_t n = view.dim() >= 2 ? view.size(0) : 0;
        const int64_t m = n > 0 ? view.numel() / n : 0;
        const int64_t r = std::min({n, m, rank});
        const bool pays = n > 0 && m > 0 &&
                          static_cast<double>((n + m) * r) * options_.min_compression_rate < static_cast<double>(n * m);
        if (pays) {
          shapes.emplace_back(n, m);
          sources.push_back(view.reshape({n, m}));
        } else {
          bucket->plain.push_back(view);
          plain_elements += view.numel();
        }
      }
      bucket->plain_flat = at::empty({plain_elements}, tensor_options);
    }
    int64_t p_elements = 0;
    int64_t q_elements = 0;
    for (const auto& [n, m] : shapes) {
      const int64_t r = std::min({n, m, rank});
      p_elements += n * r;
      q_elements += m * r;
    }
    bucket->p = at::empty({p_elements}, tensor_options);
    bucket->q = at::empty({q_elements}, tensor_options);
    int64_t p_offset = 0;
    int64_t q_offset = 0;
    for (std::size_t k = 0; k < shapes.size(); ++k) {
      const auto [n, m] = shapes[k];
      const int64_t r = std::min({n, m, rank});
      bucket->matrices.push_back({sources[k], bucket->p.narrow(0, p_offset, n * r).view({n, r}),
                                  bucket->q.narrow(0, q_offset, m * r).view({m, r})});
      p_offset += n * r;
      q_offset += m * r;
    }
    if (wire_) {
      bucket->p_wire = at::empty({p_elements}, tensor_options.dtype(*wire_));
      bucket->q_wire = at::empty({q_elements}, tensor_options.dtype(*wire_));
      if (bucket->plain_flat.defined()) {
        bucket->plain_wire = at::empty({bucket->plain_flat.numel()}, tensor_options.dtype(*wire_));
      }
    }
    if (options_.use_error_feedback) {
      bucket->error = at::zeros_like(bucket->working);
      bucket->input = at::empty_like(bucket->working);
    }
    buckets_.push_back(std::move(bucket));
  }
}

PowerSgdCompressor::~PowerSgdCompressor() = default;

int64_t PowerSgdCompressor::start(std::size_t index, ProcessGroup& group) {
  Bucket& bucket = *buckets_[index];
  if (options_.batched) {
    bucket.working.zero_();
    bucket.working.narrow(0, 0, bucket.flat.numel()).copy_(bucket.flat);
  }
  if (options_.use_error_feedback) {
    bucket.working.add_(bucket.error);
    bucket.input.copy_(bucket.working);
  }
  // Post what needs no computation first: the uncompressed gradients.
  if (!bucket.plain.empty()) {
    int64_t offset = 0;
    for (const auto& view : bucket.plain) {
      bucket.plain_flat.narrow(0, offset, view.numel()).view(view.sizes()).copy_(view);
      offset += view.numel();
    }
    at::Tensor& message = wire_ ? bucket.plain_wire.copy_(bucket.plain_flat) : bucket.plain_flat;
    bucket.plain_work = group.all_reduce_async(message, AllReduceOptions{});
  }
  for (auto& matrix : bucket.matrices) {
    if (!bucket.q_ready || !options_.warm_start) {
      // Drawn on the CPU from a generator seeded alike on every rank, in
      // bucket order: every rank starts from the same Q.
      const auto drawn = at::randn(matrix.q.sizes(), generator_, at::TensorOptions().dtype(at::kFloat));
      matrix.q.copy_(drawn);
    }
    at::mm_out(matrix.p, matrix.x, matrix.q);
  }
  if (!bucket.matrices.empty()) {
    at::Tensor& message = wire_ ? bucket.p_wire.copy_(bucket.p) : bucket.p;
    bucket.p_work = group.all_reduce_async(message, AllReduceOptions{});
  }
  const int64_t elements = bucket.p.numel() + bucket.q.numel() + (bucket.plain.empty() ? 0 : bucket.plain_flat.numel());
  return elements * static_cast<int64_t>(wire_ ? c10::elementSize(*wire_) : bucket.flat.element_size());
}

void PowerSgdCompressor::all_reduce_now(at::Tensor& tensor, at::Tensor& wire, ProcessGroup& group) const {
  if (!wire_) {
    group.all_reduce(tensor, AllReduceOptions{});
    return;
  }
  wire.copy_(tensor);
  group.all_reduce(wire, AllReduceOptions{});
  tensor.copy_(wire);
}

void PowerSgdCompressor::finish(std::size_t index, ProcessGroup& group) {
  Bucket& bucket = *buckets_[index];
  if (bucket.p_work) {
    auto work = std::move(bucket.p_work);
    work->wait();
    if (wire_) bucket.p.copy_(bucket.p_wire);
    for (auto& matrix : bucket.matrices) {
      orthonormalise(matrix.p, options_.orthogonalization_epsilon);
      at::mm_out(matrix.q, matrix.x.t(), matrix.p);
    }
    all_reduce_now(bucket.q, bucket.q_wire, group);
    for (auto& matrix : bucket.matrices) at::mm_out(matrix.x, matrix.p, matrix.q.t());
    bucket.q_ready = true;
  }
  if (bucket.plain_work) {
    auto work = std::move(bucket.plain_work);
    work->wait();
    if (wire_) bucket.plain_flat.copy_(bucket.plain_wire);
    int64_t offset = 0;
    for (auto& view : bucket.plain) {
      view.copy_(bucket.plain_flat.narrow(0, offset, view.numel()).view(view.sizes()));
      offset += view.numel();
    }
  }
  if (options_.batched) bucket.flat.copy_(bucket.working.narrow(0, 0, bucket.flat.numel()));
  if (options_.use_error_feedback) {
    // The inputs were pre-divided by the world size; the result is the
    // average: the local error is X - result / world size in that scale.
    at::sub_out(bucket.error, bucket.input, bucket.working, inverse_world_);
  }
}

}  // namespace accelerate::detail
