// The collectives under test, their message sizes and their bandwidth
// conventions (nccl-tests, doc/PERFORMANCE.md there).
//
// For a message of S bytes at n ranks and a time t per operation:
//
//   all_reduce   algbw = S / t          busbw = algbw × 2(n−1)/n
//   broadcast    algbw = S / t          busbw = algbw
//   all_gather   algbw = n·S / t        busbw = algbw × (n−1)/n
//
// S is the tensor each rank passes in: the in-place buffer of all_reduce and
// broadcast, the per-rank input of all_gather (whose output is n·S; nccl-tests
// labels all_gather rows by that output size instead). busbw is what one
// rank's link must carry and is comparable across operations and rank counts.
// GB/s means 10^9 bytes per second, as in nccl-tests.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace bench {

enum class Collective { AllReduce, Broadcast, AllGather };

inline constexpr Collective kAllCollectives[] = {Collective::AllReduce, Collective::Broadcast, Collective::AllGather};

std::string_view to_string(Collective op);
std::optional<Collective> collective_from_string(std::string_view name);

/// The message sizes of the issue: 4 B, 4 KiB, 64 KiB, 1 MiB, 16 MiB, 64 MiB.
std::vector<int64_t> default_sizes();
/// "4 B", "64 KiB", "16 MiB".
std::string format_bytes(int64_t bytes);
/// Parses "4", "4K", "64KiB", "16M", "16MiB" (binary units); nullopt when malformed.
std::optional<int64_t> parse_bytes(std::string_view text);

/// algbw in GB/s (10^9 B/s) of one operation of `bytes` taking `seconds`.
double algbw_gbps(Collective op, int64_t bytes, int ranks, double seconds);
/// busbw in GB/s: algbw times the collective's bus factor.
double busbw_gbps(Collective op, int64_t bytes, int ranks, double seconds);
/// The bus factor as text, for the report ("2(n-1)/n = 1.00").
std::string bus_factor_text(Collective op, int ranks);

/// The tensors of one (collective, size): shared by every implementation so
/// that all of them touch the same, already faulted-in memory.
struct Buffers {
  at::Tensor data;    ///< all_reduce / broadcast: float32[count], in place
  at::Tensor input;   ///< all_gather: float32[count]
  at::Tensor output;  ///< all_gather: float32[ranks × count]
  int64_t count = 0;  ///< float32 elements per rank
};

/// Allocates and touches the buffers for `bytes` of float32 per rank.
Buffers make_buffers(Collective op, int64_t bytes, int ranks);

/// Fills the buffers with rank-dependent values before a validation call.
void fill_for_validation(Collective op, Buffers& buffers, int rank);
/// Checks the result of one validation call; returns a description of the
/// first wrong element, or an empty string when the result is right.
std::string check_validation(Collective op, const Buffers& buffers, int ranks);
/// Zeros the buffers for timing (repeated sums of zeros stay zero: no
/// overflow, no denormals).
void fill_for_timing(Buffers& buffers);

}  // namespace bench
