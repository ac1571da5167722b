// Accelerate-HPC public API: include this one header.
#pragma once

#include "accelerate/config.hpp"
#include "accelerate/error.hpp"
#include "accelerate/runtime/availability.hpp"
#include "accelerate/runtime/build_info.hpp"
#include "accelerate/runtime/distributed_type.hpp"
#include "accelerate/runtime/env_config.hpp"
#include "accelerate/runtime/environment.hpp"
#include "accelerate/runtime/host.hpp"
#include "accelerate/runtime/launcher.hpp"
#include "accelerate/runtime/logging.hpp"
#include "accelerate/runtime/process_control.hpp"
#include "accelerate/runtime/split_tensor.hpp"
#include "accelerate/runtime/state.hpp"
