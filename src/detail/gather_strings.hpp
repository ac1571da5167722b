// Gathers one string per rank to a root rank (sizes first, then MPI_Gatherv).
// A minimal object gather for the runtime layer; it respects the State's timeout.
#pragma once

#include <mpi.h>

#include <chrono>
#include <string>
#include <vector>

namespace accelerate::detail {

/// On `root`, the strings of all ranks in rank order; elsewhere, empty.
std::vector<std::string> gather_strings(const std::string& mine, int root, MPI_Comm comm,
                                        std::chrono::milliseconds timeout);

}  // namespace accelerate::detail
