// Facts about the host a rank runs on.
#pragma once

#include <string>
#include <vector>

namespace accelerate {

/// Short host name (up to the first dot), as schedulers print node names.
std::string hostname();

/// CPUs this process may run on (its affinity mask), ascending.
std::vector<int> allowed_cpus();

/// Compact list form of a CPU set, e.g. {0,1,2,3,8} -> "0-3,8".
std::string format_cpu_list(const std::vector<int>& cpus);

}  // namespace accelerate
