// How the NCCL communicator of a sub-group is made. Pure: it needs neither
// NCCL nor a GPU, so it is unit-tested everywhere.
#pragma once

namespace accelerate::detail {

enum class NcclSplitMethod {
  /// ncclCommSplit from the parent group's communicator; collective over the
  /// parent, whose non-members pass NCCL_SPLIT_NOCOLOR.
  CommSplit,
  /// A new communicator among the members only: a unique id broadcast over
  /// their MPI communicator, then ncclCommInitRank.
  MpiBootstrap,
};

/// NCCL_VERSION(2, 18, 0): the first NCCL with ncclCommSplit.
inline constexpr int kNcclCommSplitVersion = 21800;

/// ncclCommSplit needs it in the nccl.h the library was compiled against
/// (`compiled_version`, NCCL_VERSION_CODE) and in the libnccl loaded at run
/// time (`runtime_version`, from ncclGetVersion; 0 when unknown). A header
/// older than 2.18 does not declare it, and a library older than 2.18 (an
/// older libnccl.so.2 found first at run time) does not have it; either way
/// the members bootstrap over MPI.
constexpr NcclSplitMethod choose_nccl_split_method(int compiled_version, int runtime_version) noexcept {
  return compiled_version >= kNcclCommSplitVersion && runtime_version >= kNcclCommSplitVersion
             ? NcclSplitMethod::CommSplit
             : NcclSplitMethod::MpiBootstrap;
}

constexpr const char* to_string(NcclSplitMethod method) noexcept {
  return method == NcclSplitMethod::CommSplit ? "ncclCommSplit" : "MPI bootstrap";
}

}  // namespace accelerate::detail
