// The step time of FusedAdamW against torch::optim::AdamW over the
// parameters of a small GPT-like model: d = 256, 4 blocks, a vocabulary of
// 8192, a context of 256; token and position embeddings, per block the four
// attention matrices d×d with biases, the MLP d×4d and 4d×d with biases and
// two LayerNorms; a final LayerNorm; a head tied to the token embedding (the
// tensor listed twice, as LibTorch's parameters() lists it; FusedAdamW takes
// it once, torch::optim::AdamW is given the distinct tensors).
//
// Sides, each with its own parameters, gradients and state:
//   adamw          torch::optim::AdamW over the model's tensors
//   adamw_one      torch::optim::AdamW over one tensor of the same total size
//                  (diagnostic: LibTorch's arithmetic without its per-tensor cost)
//   fused          accelerate::FusedAdamW over the model's tensors
// Only step() is timed; the gradients are fixed random values. Rounds visit
// the sides in rotated order; the median of each side's rounds is reported,
// and the ratio of the medians to adamw's.
#include <ATen/Parallel.h>
#include <CLI/CLI.hpp>
#include <torch/torch.h>
#include <torch/version.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <functional>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "accelerate/training/fused_optimizers.hpp"

namespace {

using Clock = std::chrono::steady_clock;

struct ModelShape {
  std::int64_t d = 256;
  std::int64_t blocks = 4;
  std::int64_t vocabulary = 8192;
  std::int64_t context = 256;
};

// The parameters as parameters() lists them: the tied head's weight again at the end.
std::vector<torch::Tensor> gpt_parameters(const ModelShape& s, std::uint64_t seed) {
  torch::manual_seed(static_cast<std::int64_t>(seed));
  std::vector<torch::Tensor> p;
  const auto param = [&](std::vector<std::int64_t> sizes) {
    p.push_back((torch::randn(sizes) * 0.02).requires_grad_());
    return p.back();
  };
  const auto token_embedding = param({s.vocabulary, s.d});
  param({s.context, s.d});  // position embedding
  for (std::int64_t b = 0; b < s.blocks; ++b) {
    param({s.d});  // LayerNorm 1
    param({s.d});
    for (int m = 0; m < 4; ++m) {  // query, key, value, output
      param({s.d, s.d});
      param({s.d});
    }
    param({s.d});  // LayerNorm 2
    param({s.d});
    param({4 * s.d, s.d});  // MLP
    param({4 * s.d});
    param({s.d, 4 * s.d});
    param({s.d});
  }
  param({s.d});  // final LayerNorm
  param({s.d});
  p.push_back(token_embedding);  // the tied head
  return p;
}

std::vector<torch::Tensor> distinct(const std::vector<torch::Tensor>& all) { return {all.begin(), all.end() - 1}; }

struct Side {
  std::string name;
  std::vector<torch::Tensor> parameters;
  std::unique_ptr<torch::optim::Optimizer> optimizer;
};

// Fixed gradients: written into whatever .grad each parameter has (the flat
// ranges for the fused side), or set.
void give_gradients(const std::vector<torch::Tensor>& parameters, std::uint64_t seed) {
  torch::NoGradGuard no_grad;
  torch::manual_seed(static_cast<std::int64_t>(seed));
  for (const auto& p : parameters) {
    const auto grad = torch::randn(p.sizes()) * 1e-3;
    if (p.grad().defined()) {
      p.mutable_grad().copy_(grad);
    } else {
      p.mutable_grad() = grad;
    }
  }
}

double seconds_per_step(torch::optim::Optimizer& optimizer, int steps) {
  const auto start = Clock::now();
  for (int i = 0; i < steps; ++i) optimizer.step();
  return std::chrono::duration<double>(Clock::now() - start).count() / steps;
}

double median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  const std::size_t m = values.size() / 2;
  return values.size() % 2 == 1 ? values[m] : 0.5 * (values[m - 1] + values[m]);
}

std::string cpuinfo_field(const std::string& key) {
  std::ifstream cpuinfo("/proc/cpuinfo");
  for (std::string line; std::getline(cpuinfo, line);) {
    if (line.rfind(key, 0) == 0) {
      const auto colon = line.find(':');
      if (colon != std::string::npos && colon + 2 <= line.size()) return line.substr(colon + 2);
    }
  }
  return "";
}

// The vector extensions that decide how wide LibTorch's kernels and the loop run.
std::string relevant_flags() {
  std::istringstream all(cpuinfo_field("flags") + " " + cpuinfo_field("Features"));
  const std::vector<std::string> wanted{"sse4_2", "avx", "avx2", "fma", "avx512f", "avx512bw", "asimd", "sve"};
  std::string kept;
  for (std::string flag; all >> flag;) {
    if (std::find(wanted.begin(), wanted.end(), flag) != wanted.end() &&
        (" " + kept + " ").find(" " + flag + " ") == std::string::npos)
      kept += (kept.empty() ? "" : " ") + flag;
  }
  return kept.empty() ? "none of the relevant ones" : kept;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"FusedAdamW against torch::optim::AdamW: step time over a GPT-like model's parameters"};
  int rounds = 7;
  int steps = 20;
  int threads = 0;
  std::string json_path;
  app.add_option("--rounds", rounds, "rounds; each side's median is reported")->capture_default_str();
  app.add_option("--steps", steps, "timed steps per side per round")->capture_default_str();
  app.add_option("--threads", threads, "intra-op threads (0: LibTorch's default)")->capture_default_str();
  app.add_option("--json", json_path, "write the results here");
  CLI11_PARSE(app, argc, argv);
  if (threads > 0) at::set_num_threads(threads);

  const ModelShape shape;
  const auto options = torch::optim::AdamWOptions(3e-4).weight_decay(0.1);
  std::vector<Side> sides;
  {
    Side side{"adamw", distinct(gpt_parameters(shape, 1)), nullptr};
    side.optimizer = std::make_unique<torch::optim::AdamW>(side.parameters, options);
    sides.push_back(std::move(side));
  }
  std::int64_t elements = 0;
  for (const auto& p : sides.front().parameters) elements += p.numel();
  {
    Side side{"adamw_one", {(torch::randn({elements}) * 0.02).requires_grad_()}, nullptr};
    side.optimizer = std::make_unique<torch::optim::AdamW>(side.parameters, options);
    sides.push_back(std::move(side));
  }
  {
    const auto all = gpt_parameters(shape, 1);
    Side side{"fused", distinct(all), nullptr};
    side.optimizer = std::make_unique<accelerate::FusedAdamW>(all, options);
    sides.push_back(std::move(side));
  }
  for (auto& side : sides) {
    give_gradients(side.parameters, 2);
    seconds_per_step(*side.optimizer, 3);  // warm-up: state allocated, pages touched
  }
  // The two model sides computed the same thing: a check that the fused one is not timed doing less.
  const double largest_difference = (sides[0].parameters[2] - sides[2].parameters[2]).abs().max().item<double>();

  std::printf("CPU: %s\nflags: %s\n", cpuinfo_field("model name").c_str(), relevant_flags().c_str());
  std::printf("LibTorch %s, %d intra-op thread(s); fused step: %s\n", TORCH_VERSION, at::get_num_threads(),
#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 4)
              "at::_fused_adamw_"
#else
              "the vectorised loop (LibTorch before 2.4)"
#endif
  );
  std::printf(
      "model: d=%lld, %lld blocks, vocabulary %lld, context %lld: %zu tensors, %lld elements (%.1f MB of float32)\n",
      static_cast<long long>(shape.d), static_cast<long long>(shape.blocks), static_cast<long long>(shape.vocabulary),
      static_cast<long long>(shape.context), sides[0].parameters.size(), static_cast<long long>(elements),
      elements * 4 / 1e6);
  std::printf("fused vs adamw after 3 steps: largest parameter difference %.3g\n", largest_difference);

  std::vector<std::vector<double>> times(sides.size());
  for (int round = 0; round < rounds; ++round) {
    for (std::size_t j = 0; j < sides.size(); ++j) {
      const std::size_t k = (j + static_cast<std::size_t>(round)) % sides.size();
      times[k].push_back(seconds_per_step(*sides[k].optimizer, steps));
    }
  }
  const double reference = median(times[0]);
  std::printf("%-10s %12s %12s %12s %10s %12s\n", "side", "median ms", "min ms", "max ms", "×adamw", "GB/s moved");
  std::ostringstream json;
  json << "{\"cpu\": \"" << cpuinfo_field("model name") << "\", \"flags\": \"" << relevant_flags()
       << "\", \"libtorch\": \"" << TORCH_VERSION << "\", \"threads\": " << at::get_num_threads()
       << ", \"rounds\": " << rounds << ", \"steps\": " << steps << ", \"elements\": " << elements
       << ", \"tensors\": " << sides[0].parameters.size() << ", \"sides\": [";
  for (std::size_t k = 0; k < sides.size(); ++k) {
    const double t = median(times[k]);
    const auto [low, high] = std::minmax_element(times[k].begin(), times[k].end());
    // The least traffic of one AdamW step: read p, g, m, v and write p, m, v.
    const double gbps = 7.0 * 4.0 * static_cast<double>(elements) / t / 1e9;
    std::printf("%-10s %12.3f %12.3f %12.3f %10.3f %12.1f\n", sides[k].name.c_str(), t * 1e3, *low * 1e3, *high * 1e3,
                t / reference, gbps);
    json << (k == 0 ? "" : ", ") << "{\"side\": \"" << sides[k].name << "\", \"median_s\": " << t
         << ", \"min_s\": " << *low << ", \"max_s\": " << *high << ", \"ratio_to_adamw\": " << t / reference << "}";
  }
  json << "]}\n";
  if (!json_path.empty()) std::ofstream(json_path) << json.str();
  return largest_difference < 1e-5 ? 0 : 1;
}
