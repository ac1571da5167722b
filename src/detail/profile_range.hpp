// A named range in LibTorch's profiler trace: the library's own work
// (collectives, gradient buckets, data-loader waits, checkpoint phases) shows
// up in `Accelerator::profile()` traces under names "accelerate::<what>".
// When no profiler runs, the range finds no callback registered and records
// nothing.
#pragma once

#include <ATen/record_function.h>

// One per scope (the macro declares a guard variable). `name` must be a
// string literal: the profiler keeps the pointer.
#define ACCELERATE_PROFILE_RANGE(name) RECORD_USER_SCOPE(name)
