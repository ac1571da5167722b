// Comparing the end of a training run with a reference run: every tensor
// within rounding, and the same on every rank.
#pragma once

#include <gtest/gtest.h>
#include <mpi.h>
#include <torch/torch.h>

#include <cstddef>
#include <vector>

namespace accelerate::testing {

/// `run` matches `reference` tensor by tensor within (rtol, atol), and every
/// tensor of `run` equals rank 0's on every rank of MPI_COMM_WORLD. Collective.
inline void expect_ends_where(const std::vector<torch::Tensor>& run, const std::vector<torch::Tensor>& reference,
                              double rtol = 1e-5, double atol = 1e-6) {
  ASSERT_EQ(run.size(), reference.size());
  for (std::size_t i = 0; i < reference.size(); ++i) {
    EXPECT_TRUE(torch::allclose(run[i], reference[i], rtol, atol))
        << "tensor " << i << " differs by " << (run[i] - reference[i]).abs().max().item<double>();
  }
  for (std::size_t i = 0; i < run.size(); ++i) {
    torch::Tensor mine = run[i].contiguous().to(torch::kFloat64);
    torch::Tensor root = mine.clone();
    MPI_Bcast(root.data_ptr(), static_cast<int>(root.numel()), MPI_DOUBLE, 0, MPI_COMM_WORLD);
    EXPECT_TRUE(torch::equal(mine, root)) << "tensor " << i << " differs from rank 0's";
  }
}

}  // namespace accelerate::testing
