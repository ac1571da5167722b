// The checkpoint file API in a build without HDF5 (ACCELERATE_WITH_HDF5=OFF):
// every entry point exists and throws FeatureNotBuilt naming itself, so a
// program that can checkpoint links everywhere and learns at run time, on
// every rank, what to rebuild with. Compiled instead of the HDF5 sources.
#include <ATen/core/Tensor.h>

#include "accelerate/checkpoint/checkpoint_reader.hpp"
#include "accelerate/checkpoint/checkpoint_writer.hpp"
#include "accelerate/error.hpp"

namespace accelerate::checkpoint {
namespace {

[[noreturn]] void not_built(std::string_view call) {
  accelerate::detail::throw_feature_not_built("parallel HDF5", call, "ACCELERATE_WITH_HDF5");
}

}  // namespace

// Neither class can be constructed, so their other members are never reached;
// they exist for the linker.
struct CheckpointWriter::Impl {};

CheckpointWriter::CheckpointWriter(const WriterOptions&, const CheckpointInfo&) { not_built("CheckpointWriter"); }
CheckpointWriter::~CheckpointWriter() = default;
void CheckpointWriter::write_replicated(std::string_view, const at::Tensor&) { not_built("CheckpointWriter"); }
void CheckpointWriter::write_per_rank(std::string_view, const at::Tensor&) { not_built("CheckpointWriter"); }
void CheckpointWriter::write_pieces(std::string_view, c10::ScalarType, at::IntArrayRef, std::vector<TensorPiece>) {
  not_built("CheckpointWriter");
}
void CheckpointWriter::write_per_rank_bytes(std::string_view, std::span<const std::byte>) {
  not_built("CheckpointWriter");
}
void CheckpointWriter::set_attribute(std::string_view, std::string_view, const AttributeValue&) {
  not_built("CheckpointWriter");
}
void CheckpointWriter::close() { not_built("CheckpointWriter"); }
std::uint64_t CheckpointWriter::bytes_written_locally() const noexcept { return 0; }
int CheckpointWriter::size() const noexcept { return 1; }
const std::filesystem::path& CheckpointWriter::file() const noexcept {
  static const std::filesystem::path none;
  return none;
}

struct CheckpointReader::Impl {};

CheckpointReader::CheckpointReader(const ReaderOptions&) { not_built("CheckpointReader"); }
CheckpointReader::~CheckpointReader() = default;
const CheckpointHeader& CheckpointReader::header() const noexcept {
  static const CheckpointHeader none;
  return none;
}
std::vector<EntryInfo> CheckpointReader::entries(std::string_view) const { not_built("CheckpointReader"); }
bool CheckpointReader::contains(std::string_view) const { not_built("CheckpointReader"); }
const EntryInfo& CheckpointReader::entry(std::string_view) const { not_built("CheckpointReader"); }
at::Tensor CheckpointReader::read_replicated(std::string_view) { not_built("CheckpointReader"); }
std::vector<at::Tensor> CheckpointReader::read_replicated(const std::vector<std::string>&) {
  not_built("CheckpointReader");
}
void CheckpointReader::read_replicated_into(std::string_view, const at::Tensor&) { not_built("CheckpointReader"); }
int CheckpointReader::per_rank_source_row() const { not_built("CheckpointReader"); }
at::Tensor CheckpointReader::read_per_rank(std::string_view, int) { not_built("CheckpointReader"); }
void CheckpointReader::read_pieces(std::string_view, std::vector<TensorPiece>, int) { not_built("CheckpointReader"); }
std::vector<std::byte> CheckpointReader::read_per_rank_bytes(std::string_view, int) { not_built("CheckpointReader"); }
std::optional<AttributeValue> CheckpointReader::attribute(std::string_view, std::string_view) {
  not_built("CheckpointReader");
}
KeyReport CheckpointReader::load_into(std::string_view, const std::map<std::string, at::Tensor>&, bool) {
  not_built("CheckpointReader");
}
KeyReport CheckpointReader::check_keys(std::string_view, const std::vector<TensorSpec>&, bool) {
  not_built("CheckpointReader");
}
const std::filesystem::path& CheckpointReader::file() const noexcept {
  static const std::filesystem::path none;
  return none;
}
int CheckpointReader::read_threads() const noexcept { return 0; }
int CheckpointReader::size() const noexcept { return 1; }

}  // namespace accelerate::checkpoint
