#include "accelerate/comm/work.hpp"

#include <cstdio>

namespace accelerate {
namespace {

class CompletedWork final : public Work {
 public:
  CompletedWork(std::string description, std::exception_ptr error)
      : description_(std::move(description)), error_(std::move(error)) {}
  bool is_completed() override { return true; }
  void wait() override {
    if (error_) std::rethrow_exception(error_);
  }
  [[nodiscard]] std::exception_ptr exception() const override { return error_; }
  [[nodiscard]] const std::string& description() const override { return description_; }

 private:
  std::string description_;
  std::exception_ptr error_;
};

}  // namespace

std::unique_ptr<Work> completed_work(std::string description, std::exception_ptr error) {
  return std::make_unique<CompletedWork>(std::move(description), std::move(error));
}

namespace detail {

void complete_dropped_work(Work& work) noexcept {
  // The buffers of a pending operation must outlive the transport's use of
  // them, so a dropped Work is completed; its error cannot propagate from a
  // destructor and is reported instead.
  try {
    work.wait();
  } catch (const std::exception& error) {
    std::fprintf(stderr, "%s (error of a dropped Work, reported by its destructor)\n", error.what());
  }
}

}  // namespace detail
}  // namespace accelerate
